"""Vector math for generated C: ``exp``, ``log``, ``tanh``, ``erf`` and ``sigmoid`` over
GCC vector types of float32, so a vectorized loop that calls them stays in vector registers
(libm's ``expf`` is scalar: called lane by lane it made a "vectorized" softmax slower than
numpy).

Each function is range reduction plus a polynomial, written with vector-extension
arithmetic only (no intrinsics), so one text serves every ISA and width; special values
are patched with lane masks. The polynomials' coefficients were fitted for this module
(near-minimax on the reduced ranges named below). ``ULP_BOUNDS`` states the accuracy: the
largest error in units in the last place against a float64 reference over every float32
input (``bench/vmath_accuracy.py`` checks all 2^32; the tests check a dense sample of the
whole range, infinities, NaN and denormals):

- exp: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial in Horner's form (one operation
  fewer than 1 + (r + r^2 P(r)): exp 4%, sigmoid 7% faster on Zen 4's AVX-512; exp's
  worst error 1.08 -> 0.96 ulps, tanh's 1.34 -> 1.37), scaled by 2^n in two steps so
  results in the denormal range round once (on 16 lanes of AVX-512 by one ``vscalefps``,
  which rounds the same); overflow gives inf, underflow 0. A vector whose lanes all have
  normal results (x in [-86.5, 88.3]: every lane of a softmax, GELU or erf) is scaled by
  one integer add to the exponent field instead (exact, so the same result), checked per
  vector by one ``movmskps`` on x86; the others take the full path, out of line. An AVX2
  exp is 18-20% faster for it. On AVX-512 the argument is clamped with ``vmaxps`` and
  ``vminps``: as selects (compares and masked moves) they took half of an exp's time.
- log: x = m 2^e, m in [sqrt(1/2), sqrt(2)), log1p(m - 1) by a degree-10 polynomial;
  log(0) = -inf, log(x < 0) = NaN, denormal inputs scaled first.
- tanh: |x| < 0.625 an odd degree-11 polynomial, else 1 - 2 / (exp(2|x|) + 1).
- erf: |x| < 1 x + x P(x^2) with a degree-6 P, else 1 - exp(-x^2) R(1/|x|), degree-9 R,
  and 1 from |x| > 3.92 (where erfc(x) is below half an ulp of 1). The exp's argument is
  held at -16 or above: those lanes take 1 anyway, and exp(-x^2) of a large x, denormal
  or flushing to zero, costs a microcode assist per vector on Intel cores (a BERT FFN
  kernel with its GELU fused ran 3.5 instead of 2.2 ms).
- sigmoid: e = exp(-|x|), 1 / (1 + e) for x >= 0, e / (1 + e) below (no overflow, and
  denormal results for x < -87 stay accurate).
"""

from __future__ import annotations

#: the functions with a vector version (float32 lanes)
FUNCTIONS = ("exp", "log", "tanh", "erf", "sigmoid")

#: largest error in ulps over every float32 input with a finite result, measured
#: exhaustively by ``bench/vmath_accuracy.py`` (0.5 would be correct rounding)
ULP_BOUNDS = {"exp": 0.96, "log": 0.96, "tanh": 1.38, "erf": 1.15, "sigmoid": 2.41}

_EXP = (0.5, 0.166665778, 0.0416668542, 0.00836314075, 0.00139012688)
_LOG = (0.333333313, -0.25000304, 0.200011998, -0.166415796, 0.142099753, -0.129893392,
        0.126554877, -0.0797375068)
_TANH = (-0.333333284, 0.133327708, -0.0538509488, 0.0209973399, -0.00609692)
_ERF = (0.128379167, -0.37612626, 0.112835854, -0.026853811, 0.00518832728, -0.000801018905,
        7.85384691e-05)
_ERFC = (0.000129282256, 0.561625004, 0.0216116123, -0.380453557, 0.242646456, 0.217103481,
         -0.513030887, 0.421325862, -0.172889978, 0.0295162834)


def _horner(var: str, coeffs: tuple[float, ...]) -> str:
    """``c0 + c1 v + c2 v^2 + ...`` in Horner form, as C text."""
    text = f"{coeffs[-1]!r}f"
    for c in reversed(coeffs[:-1]):
        text = f"({text} * {var} + {c!r}f)"
    return text


# Templates: {V} the float vector type, {I} the int32 vector of the same lanes, {S} the
# suffix naming this width. Vector casts between equal sizes reinterpret the bits;
# comparisons give lanes of 0 / -1, which select with `tt_vsel_{S}`.
#: p * 2^n (n whole, k its int32 value) in two exact steps, so that a result in the
#: denormal range is rounded once
_SCALE = """\
static inline {V} tt_vscale_{S}({V} p, {V} n, {I} k) {{
  (void)n;
  {I} k1 = k >> 1;
  {I} k2 = k - k1;
  return p * ({V})((k1 + 127) << 23) * ({V})((k2 + 127) << 23);
}}"""

#: the same on 16 lanes of AVX-512: ``vscalefps`` rounds p * 2^n once (equal results).
#: The compiler's builtin behind ``_mm512_scalef_ps`` (GCC's and Clang's name), called
#: directly: including immintrin.h would double a kernel's compile time.
_SCALE_AVX512 = """\
#if defined(__AVX512F__) && defined(__GNUC__)
typedef float tt_v16sf __attribute__((vector_size(64)));
static inline {V} tt_vscale_{S}({V} p, {V} n, {I} k) {{
  (void)k;
  return ({V})__builtin_ia32_scalefps512_mask((tt_v16sf)p, (tt_v16sf)n, (tt_v16sf)p,
                                               (unsigned short)0xFFFF, 4);
}}
#else
""" + _SCALE + """
#endif"""

#: exp's range reduction and polynomial: x = n ln2 + r, p = e^r, k = n as int32
_EXP_REDUCTION = """\
  {V} t = x * 1.44269502f + 12582912.0f;
  {V} n = t - 12582912.0f;
  {I} k = ({I})t - 0x4B400000;
  {V} r = x - n * 0.693145752f;
  r = r - n * 1.42860677e-06f;
  {V} p = """ + _horner("r", (1.0, 1.0, *_EXP)) + """;"""

#: exp of any input: clamped to where the result is 0 or inf (NaN stays NaN), scaled by
#: 2^n in two steps
_EXP_EVERY_INPUT = """\
  x = tt_vclamp_{S}(x, -104.0f, 88.75f);
""" + _EXP_REDUCTION + """
  return tt_vscale_{S}(p, n, k);"""

#: x held in [lo, hi], NaN kept: lane by lane, or on 16 lanes of AVX-512 one ``vmaxps`` and
#: one ``vminps`` (the builtins behind ``_mm512_max_ps``/``_mm512_min_ps``: x86's max and
#: min return their second operand where either is NaN), where the compiler made each
#: bound two compares and three masked moves
_CLAMP = """\
static inline {V} tt_vclamp_{S}({V} x, float lo, float hi) {{
  for (unsigned l = 0; l < sizeof(x) / sizeof(x[0]); ++l) {{
    x[l] = lo > x[l] ? lo : x[l];
    x[l] = hi < x[l] ? hi : x[l];
  }}
  return x;
}}"""

_CLAMP_AVX512 = """\
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
static inline {V} tt_vclamp_{S}({V} x, float lo, float hi) {{
  tt_v16sf y = __builtin_ia32_maxps512_mask(({V}){{0}} + lo, (tt_v16sf)x, (tt_v16sf)x,
                                             (unsigned short)0xFFFF, 4);
  return ({V})__builtin_ia32_minps512_mask(({V}){{0}} + hi, y, y, (unsigned short)0xFFFF, 4);
}}
#else
""" + _CLAMP + """
#endif"""

#: whether every lane of a comparison mask is set: a loop over the lanes, or on x86 one
#: ``movmskps`` of 4 or 8 lanes (the builtins behind ``_mm_movemask_ps`` and
#: ``_mm256_movemask_ps``, called directly as the scaling's is)
_ALL_LANES = """\
static inline int tt_vall_{S}({I} m) {{
  int all = 1;
  for (unsigned l = 0; l < sizeof(m) / sizeof(m[0]); ++l) all &= m[l] != 0;
  return all;
}}"""


def _all_lanes_x86(feature: str, builtin: str, bits: str) -> str:
    return (f"#if defined({feature}) && defined(__GNUC__)\n"
            f"static inline int tt_vall_{{S}}({{I}} m) {{{{\n"
            f"  return {builtin}(({{V}})m) == {bits};\n}}}}\n#else\n{_ALL_LANES}\n#endif")

_TEMPLATES: dict[str, tuple[tuple[str, ...], str]] = {
    "sel": ((), """\
static inline {V} tt_vsel_{S}({I} m, {V} a, {V} b) {{
  return ({V})((m & ({I})a) | (~m & ({I})b));
}}"""),
    "scale": ((), _SCALE),
    "clamp": ((), _CLAMP),
    "exp_full": (("clamp", "scale"), """\
static __attribute__((noinline)) {V} tt_vexp_full_{S}({V} x) {{
""" + _EXP_EVERY_INPUT + """
}}"""),
    "all": ((), _ALL_LANES),
    "exp": (("all", "exp_full"), """\
static inline {V} tt_vexp_{S}({V} x) {{
  if (__builtin_expect(tt_vall_{S}((x >= -86.5f) & (x <= 88.3f)), 1)) {{
""" + _EXP_REDUCTION + """
    return ({V})(({I})p + (k << 23));
  }}
  return tt_vexp_full_{S}(x);
}}"""),
    "log": (("sel",), """\
static inline {V} tt_vlog_{S}({V} x) {{
  {I} tiny = x < 1.17549435e-38f;
  {I} bits = ({I})tt_vsel_{S}(tiny, x * 8388608.0f, x);
  {I} e = ((bits >> 23) & 0xff) - 127 - (tiny & 23);
  {V} m = ({V})((bits & 0x007fffff) | 0x3f800000);
  {I} high = m > 1.41421354f;
  m = tt_vsel_{S}(high, m * 0.5f, m);
  {V} f = m - 1.0f;
  {V} ef = __builtin_convertvector(e - high, {V});
  {V} y = f + f * f * (-0.5f + f * """ + _horner("f", _LOG) + """);
  y = ef * 0.693145752f + (y + ef * 1.42860677e-06f);
  y = tt_vsel_{S}(x == 0.0f, ({V}){{0}} - __builtin_inff(), y);
  y = tt_vsel_{S}((x < 0.0f) | (x != x), ({V}){{0}} + __builtin_nanf(""), y);
  return tt_vsel_{S}(x == __builtin_inff(), x, y);
}}"""),
    "tanh": (("sel", "exp"), """\
static inline {V} tt_vtanh_{S}({V} x) {{
  {V} a = ({V})(({I})x & 0x7fffffff);
  {V} s = x * x;
  {V} small = x + x * s * """ + _horner("s", _TANH) + """;
  {V} large = 1.0f - 2.0f / (tt_vexp_{S}(a + a) + 1.0f);
  large = ({V})(({I})large | (({I})x & (int)0x80000000));
  return tt_vsel_{S}(a < 0.625f, small, large);
}}"""),
    "erf": (("sel", "exp"), """\
static inline {V} tt_verf_{S}({V} x) {{
  {V} a = ({V})(({I})x & 0x7fffffff);
  {V} s = x * x;
  {V} small = x + x * """ + _horner("s", _ERF) + """;
  {V} t = 1.0f / tt_vsel_{S}(a < 1.0f, ({V}){{0}} + 1.0f, a);
  {V} e = tt_vexp_{S}(tt_vsel_{S}(s < 16.0f, -s, ({V}){{0}} - 16.0f));
  {V} large = 1.0f - e * """ + _horner("t", _ERFC) + """;
  large = tt_vsel_{S}(a > 3.92f, ({V}){{0}} + 1.0f, large);
  large = ({V})(({I})large | (({I})x & (int)0x80000000));
  return tt_vsel_{S}(a < 1.0f, small, large);
}}"""),
    "sigmoid": (("sel", "exp"), """\
static inline {V} tt_vsigmoid_{S}({V} x) {{
  {V} e = tt_vexp_{S}(-({V})(({I})x & 0x7fffffff));
  return tt_vsel_{S}(x < 0.0f, e, ({V}){{0}} + 1.0f) / (1.0f + e);
}}"""),
}

#: templates that replace a helper's at one width: (helper, lanes) -> (dependencies,
#: template). 16 lanes are AVX-512's, whose one-instruction scaling leaves no fast path
#: worth a branch: exp is computed for every input inline.
_WIDTH_TEMPLATES: dict[tuple[str, int], tuple[tuple[str, ...], str]] = {
    ("scale", 16): ((), _SCALE_AVX512),
    ("clamp", 16): (("scale",), _CLAMP_AVX512),
    # on AVX-512 lane by lane (a compare's mask register and one vblendmps), not through
    # integer logic on a mask vector: tanh and sigmoid 4-6% faster
    ("sel", 16): ((), """\
static inline {V} tt_vsel_{S}({I} m, {V} a, {V} b) {{
  {V} r;
  for (unsigned l = 0; l < 16; ++l) r[l] = m[l] ? a[l] : b[l];
  return r;
}}"""),
    ("all", 4): ((), _all_lanes_x86("__SSE__", "__builtin_ia32_movmskps", "0xF")),
    ("all", 8): ((), _all_lanes_x86("__AVX__", "__builtin_ia32_movmskps256", "0xFF")),
    ("exp", 16): (("clamp", "scale"), """\
static inline {V} tt_vexp_{S}({V} x) {{
""" + _EXP_EVERY_INPUT + """
}}"""),
}


def definitions(name: str, vtype: str, itype: str, suffix: str,
                lanes: int = 0) -> list[tuple[str, str]]:
    """The C helpers that compute ``name`` over ``vtype`` (float32 lanes), as
    ``(helper name, definition)`` pairs with dependencies first; the last one is ``name``'s
    own. ``itype`` is the int32 vector type of the same width; ``suffix`` names the width in
    the helpers' names; ``lanes`` (when known) lets 16 lanes use AVX-512 where the
    compiler targets it."""
    if name not in FUNCTIONS:
        raise ValueError(f"no vector version of {name!r}; have {', '.join(FUNCTIONS)}")
    out: list[tuple[str, str]] = []

    def add(fn: str) -> None:
        deps, template = _WIDTH_TEMPLATES.get((fn, lanes), _TEMPLATES[fn])
        for dep in deps:
            add(dep)
        helper = f"tt_v{fn}_{suffix}"
        if all(h != helper for h, _ in out):
            out.append((helper, template.format(V=vtype, I=itype, S=suffix)))

    add(name)
    return out
