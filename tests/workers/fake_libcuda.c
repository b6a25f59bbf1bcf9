/* A test double of the CUDA driver library (libcuda.so.1) for machines without a GPU.
 *
 * It implements the driver calls schedule/cuda_driver.py makes, on host memory: one device
 * ("Fake GPU (test double)", sm_90, 50 MB of L2), allocations with calloc, copies and fills
 * with memcpy/memset, events from the monotonic clock. It cannot run GPU code: a launch
 * only logs the kernel's name and grid/block to $FAKE_CUDA_LOG, except two kernels it
 * emulates so the tests can see arguments arrive: "add_one" adds 1 to the first blockDim.x
 * floats of its first parameter, and "fault" makes every later call fail with
 * CUDA_ERROR_ILLEGAL_ADDRESS (700), as a real context does after an illegal access.
 * Modules must be ELF images (a cubin); anything else is CUDA_ERROR_INVALID_IMAGE (200).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

static int faulted = 0;

static CUresult status(void) { return faulted ? 700 : 0; }

static void log_line(const char *text) {
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fputs(text, f);
    fputc('\n', f);
    fclose(f);
}

CUresult cuInit(unsigned flags) { (void)flags; return 0; }

CUresult cuGetErrorName(CUresult code, const char **name) {
    *name = code == 700 ? "CUDA_ERROR_ILLEGAL_ADDRESS"
          : code == 200 ? "CUDA_ERROR_INVALID_IMAGE"
          : code == 101 ? "CUDA_ERROR_INVALID_DEVICE"
          : code == 400 ? "CUDA_ERROR_INVALID_HANDLE" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

CUresult cuGetErrorString(CUresult code, const char **text) {
    *text = code == 700 ? "an illegal memory access was encountered" : "fake driver error";
    return 0;
}

CUresult cuDeviceGetCount(int *count) { *count = 1; return 0; }

CUresult cuDeviceGet(int *device, int ordinal) {
    if (ordinal != 0) return 101;
    *device = 0;
    return 0;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
    (void)device;
    switch (attribute) {
        case 1: *value = 1024; break;           /* max threads per block */
        case 8: *value = 49152; break;          /* shared memory per block */
        case 12: *value = 65536; break;         /* registers per block */
        case 10: *value = 32; break;            /* warp size */
        case 16: *value = 132; break;           /* multiprocessors */
        case 38: *value = 50 << 20; break;      /* L2 bytes */
        case 75: *value = 9; break;             /* compute capability major */
        case 76: *value = 0; break;             /* minor */
        default: return 1;
    }
    return 0;
}

CUresult cuDeviceGetName(char *name, int length, int device) {
    (void)device;
    snprintf(name, (size_t)length, "Fake GPU (test double)");
    return 0;
}

CUresult cuDevicePrimaryCtxRetain(void **context, int device) {
    (void)device;
    *context = (void *)0x1;
    return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(int device) { (void)device; return 0; }
CUresult cuCtxSetCurrent(void *context) { (void)context; return 0; }
CUresult cuCtxSynchronize(void) { return status(); }

CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
    if (faulted) return 700;
    *ptr = (CUdeviceptr)(uintptr_t)calloc(1, bytes);
    return *ptr ? 0 : 2;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) { free((void *)(uintptr_t)ptr); return 0; }

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    if (!faulted) memcpy((void *)(uintptr_t)dst, src, bytes);
    return status();
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    if (!faulted) memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return status();
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t bytes) {
    if (!faulted) memset((void *)(uintptr_t)dst, value, bytes);
    return status();
}

CUresult cuModuleLoadData(void **module, const void *image) {
    if (memcmp(image, "\x7f" "ELF", 4) != 0) return 200;
    *module = (void *)0x2;
    return 0;
}

CUresult cuModuleUnload(void *module) { (void)module; return 0; }

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    (void)module;
    *function = strdup(name);
    return 0;
}

CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra) {
    (void)shared; (void)stream; (void)extra;
    if (faulted) return 700;
    const char *name = (const char *)function;
    char line[512];
    snprintf(line, sizeof line, "launch %s grid %u %u %u block %u %u %u", name, gx, gy, gz,
             bx, by, bz);
    log_line(line);
    if (strcmp(name, "add_one") == 0) {
        float *data = (float *)(uintptr_t)(*(CUdeviceptr *)params[0]);
        for (unsigned i = 0; i < bx; i++) data[i] += 1.0f;
    } else if (strcmp(name, "fault") == 0) {
        faulted = 1;
    }
    return 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

CUresult cuEventCreate(void **event, unsigned flags) {
    (void)flags;
    *event = calloc(1, sizeof(double));
    return 0;
}

CUresult cuEventRecord(void *event, void *stream) {
    (void)stream;
    *(double *)event = now_ms();
    return status();
}

CUresult cuEventSynchronize(void *event) { (void)event; return status(); }

CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
    if (*(double *)start == 0 || *(double *)end == 0) return 400;  /* not recorded */
    double spent = *(double *)end - *(double *)start;
    *ms = (float)(spent > 1e-4 ? spent : 1e-4);
    return status();
}

CUresult cuEventDestroy_v2(void *event) { free(event); return 0; }
