"""Request and response bodies of the REST API (pydantic models; they make the OpenAPI
schema). Job bodies are validated for real by :meth:`tuner.JobSpec.from_json`, whose
messages name the bad field; the models here describe their shape."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ErrorBody(BaseModel):
    detail: Any = Field(description="what was wrong, in words (or a list of field errors)")


class JobOptions(BaseModel):
    """A job's target, trial budget and search options: the ``spec`` field of a model
    upload (whose workloads are the model's tasks)."""

    model_config = ConfigDict(extra="forbid", strict=True)  # no bools, strings or 2.0 as ints

    target: str = Field(description='"cpu" (this machine) or a canonical target string')
    trials: int = Field(description="total measured candidates, shared by the workloads")
    batch_size: int | None = None
    time_budget_s: float | None = None
    early_stop: int | None = Field(None, description="stop a workload after so many trials "
                                                     "without improvement")
    scheduler: str | None = Field(None, description="gradient | round-robin")
    policy: str | None = Field(None, description="sketch | random")
    cost_model: str | None = Field(None, description="xgb | sklearn | analytic | random")
    share_across_tasks: bool | None = Field(
        None, description="the workloads train one cost model and start from each other's "
                          "best programs (default true); false: each learns alone")
    reconfirm: int | None = Field(None, description="best programs measured again at the end")
    seed: int | None = None
    baselines: list[str] | None = Field(None, description="what each task is measured against "
                                                       "on its device first: numpy, torch, "
                                                       "peak (default numpy, peak; [] none)")
    measure: dict[str, Any] | None = Field(None, description="measure settings: number, "
                                           "repeat, min_repeat_ms, timeouts ...")


class JobRequest(JobOptions):
    """A tuning job: workloads, target and trial budget, plus search options."""

    model_config = ConfigDict(
        extra="forbid", strict=True,
        json_schema_extra={"examples": [{
            "workloads": [{"op": "matmul", "params": {"M": 512, "N": 512, "K": 512}}],
            "target": "cpu", "trials": 64}]},
    )

    workloads: list[dict[str, Any]] = Field(
        description='{"op": NAME, "params": {...}} (see GET /v1/ops), or '
                    '{"workload": {...}, "weight": W}')


#: The OpenAPI description of a model upload to ``POST /v1/jobs`` (multipart/form-data).
MODEL_UPLOAD_DOC: dict[str, Any] = {"requestBody": {"content": {"multipart/form-data": {
    "schema": {
        "type": "object", "required": ["model", "spec"],
        "properties": {
            "model": {"type": "string", "format": "binary",
                      "description": "the ONNX model file (external data is refused)"},
            "spec": {"type": "string", "description":
                     'JSON: {"target": ..., "trials": ..., other job options}, no '
                     'workloads (they are the model\'s tasks)'}}}}}}}


class JobCreated(BaseModel):
    id: str
    url: str
    events_url: str
    status: str
    duplicate: bool = Field(False, description="true: an earlier identical submission's job")


class BaselineView(BaseModel):
    latency_s: float | None = Field(description="seconds per call measured on the job's "
                                                "device (peak: the task's FLOPs at the "
                                                "target's measured peak); null: not measured")
    error: str = Field("", description="why it could not be measured")


class TaskView(BaseModel):
    workload_key: str
    name: str
    title: str = Field(description="readable: the operator and its non-default parameters")
    workload: dict[str, Any]
    weight: float
    flops: float
    state: str
    trials: int
    valid: int
    errors: dict[str, int]
    best_latency_s: float | None
    best_gflops: float | None
    confirmed: bool
    curve: list[list[float | None]] = Field(
        description="[trials, best latency in s] points (null: no valid program yet)")
    error: str = Field("", description="why the task cannot run (state 'invalid')")
    expected_gain_s: float | None = Field(
        None, description="the task scheduler's estimate of how much one more round of this "
                          "task cuts the weighted latency sum (s); null before its first round")
    chosen_because: str = Field("", description="why the scheduler gave it its last round")
    baselines: dict[str, BaselineView] = Field(
        default_factory=dict, description="what the job measured the task against on its "
                                          "device before tuning: numpy, torch, peak")
    best_facts: dict[str, float] = Field(
        default_factory=dict, description="a simulated device's figures of the best program "
                                          "(vta: cycles, mac_utilization, clock_mhz, ...); "
                                          "empty for timed devices")


class TrialView(BaseModel):
    n: int = Field(description="the task's trial count after this measurement")
    latency_s: float | None = Field(description="median seconds per call; null: it failed")
    error_kind: str
    error: str = Field(description="the failure's message, cut to 200 characters")
    reconfirm: bool = Field(description="a final re-measurement of a best program")
    disturbed: bool = Field(description="the machine's other work slowed it (see README)")


class TaskTrials(BaseModel):
    workload_key: str
    title: str
    flops: float
    trials: list[TrialView]


class JobTrials(BaseModel):
    job_id: str
    status: str
    tasks: list[TaskTrials]


class JobView(BaseModel):
    id: str
    status: str
    owner: str | None
    error: str
    target: str
    trials: int
    trial_budget: int
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    url: str
    events_url: str
    tasks: list[TaskView]
    spec: dict[str, Any] | None = None
    model: dict[str, str] | None = Field(
        None, description="a model's job: the uploaded model's name and SHA-256")
    estimated_latency_s: float | None = Field(
        None, description="the weighted sum of the tasks' best latencies (a model's "
                          "estimated end-to-end latency in its tuned kernels); null while a "
                          "task has no valid program")
    estimate_curve: list[list[float]] = Field(
        default_factory=list, description="[trials, estimated latency in s] after each batch")
    seconds: dict[str, float] = Field(
        default_factory=dict, description="where the wall time went: search, measure (of "
                                          "which build and run, summed over workers), "
                                          "database, total")


class JobList(BaseModel):
    jobs: list[JobView]
    limit: int
    offset: int


class ModelTaskBest(BaseModel):
    workload_key: str
    name: str
    weight: float
    flops: float
    best_latency_s: float | None = Field(description="its best record on the job's target "
                                                     "(from any job); null: none yet")
    best_gflops: float | None
    weighted_latency_s: float | None = Field(description="weight x best latency")
    job_id: str | None = Field(description="the job that measured the best record")
    steps: list[Any] | None


class ModelBest(BaseModel):
    job_id: str
    status: str
    target: str
    model: dict[str, str]
    estimated_latency_s: float | None = Field(
        description="the model's estimated end-to-end latency in its tuned kernels (null "
                    "while a task has no record); numpy-run groups and executor overhead "
                    "are not included")
    missing: list[str] = Field(description="workload keys without a record")
    tasks: list[ModelTaskBest]
    estimate_curve: list[list[float]] = Field(
        description="the job's [trials, estimated latency in s] after each batch")


class BestEntry(BaseModel):
    steps: list[Any]
    latency_s: float
    gflops: float | None
    costs: list[float]
    measured_at: float
    device_model: str
    toolchain: str
    target: str
    job_id: str | None


class BestProgram(BaseModel):
    workload_key: str
    target: str
    record_id: str = Field(description="the measurement whose program this is")
    latency_s: float | None
    steps: list[Any]
    loop_ir: str = Field(description="the program lowered to loops (tensortune's loop IR)")
    source: str = Field(description="the source generated for the target (C for cpu)")


class BestAnswer(BaseModel):
    workload_key: str
    target: str
    match: str = Field(description="exact | other_toolchain | other_device | same_isa")
    results: list[BestEntry]


class BestBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    workload_keys: list[str] = Field(max_length=4096)
    target: str
    k: int = Field(1, ge=1, le=100)
    fallback: str | None = None


class BestBatchAnswer(BaseModel):
    target: str
    results: dict[str, BestAnswer]
    missing: list[str] = Field(description="keys with no error-free record")


class RecordPage(BaseModel):
    total: int
    limit: int
    offset: int
    records: list[dict[str, Any]]


class ImportResult(BaseModel):
    source: str
    lines: int
    records: int
    added: int
    already_present: int
    bad_lines: list[dict[str, Any]]
    unknown_fields: list[str]
    imported: bool


class OpInfo(BaseModel):
    name: str
    description: str
    params_schema: dict[str, Any]


class WorkloadSummary(BaseModel):
    workload_key: str
    target: str
    records: int
    ok_records: int
    best_latency_s: float | None
    best_gflops: float | None
    first_seen: float
    last_seen: float


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    role: str = Field(description="reader | submitter | admin")
    owner: str | None = Field(None, min_length=1, max_length=255,
                              description="a shared owner to grant (tokens of one owner "
                                          "share their jobs); default: the token itself")


class TokenCreated(BaseModel):
    token: str = Field(description="the secret; shown only this once")
    id: str
    role: str
    owner: str


class TokenInfo(BaseModel):
    id: str
    role: str
    owner: str
    created_at: float
    revoked_at: float | None


class Health(BaseModel):
    status: str = Field(description="ok | degraded")
    database: str = Field(description="ok | down; for admins, why it is down")
    jobs_active: int | None = Field(description="jobs running in this server (admins only)")
