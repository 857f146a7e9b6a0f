"""A native thread that launches kernels on the simulated MSPTI, for tests whose timing a Python
thread cannot give: it keeps running while the profiling thread is inside stop() or fork() (a
Python thread would wait for the GIL), as the runtime's own threads do.

``compile(directory)`` builds ``liblauncher.so`` with the system C compiler (None without one).
In the child process, ``LOAD`` (Python source) defines ``launcher(path)``, which loads it with
ctypes. The library's C API:

* ``launcher_start(simulator_path, interval_us, flush)``: starts the thread; it launches a 2 µs
  kernel ``NativeK`` on device 0 stream 9 every ``interval_us`` µs and, when ``flush`` is non-zero,
  calls ``msptiActivityFlushAll`` after each launch (so buffers are requested and completed all the
  time). Returns 0, or < 0 when the simulator is not loaded. Records per launch the CLOCK_REALTIME
  ns before the call and the correlation id returned (at most 65536 launches);
* ``launcher_stop()``: stops and joins the thread, returns the number of launches;
* ``launcher_id(i)`` / ``launcher_start_ns(i)``: what launch ``i`` recorded.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
typedef uint64_t (*launch_fn)(const char*, const char*, uint32_t, uint32_t, uint64_t);
typedef int (*flush_fn)(uint32_t);
enum { kMax = 1 << 16 };
static launch_fn launch;
static flush_fn flush_all;
static atomic_int stopping, count;
static pthread_t thread;
static int interval_us, flushing;
static uint64_t ids[kMax];
static int64_t starts[kMax];
static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
static void* run(void* arg) {
  (void)arg;
  while (!atomic_load(&stopping)) {
    int i = atomic_load(&count);
    int64_t t = now_ns();
    uint64_t id = launch("NativeK", "KERNEL_AICORE", 0, 9, 2000);
    if (i < kMax) {
      starts[i] = t;
      ids[i] = id;
      atomic_store(&count, i + 1);
    }
    if (flushing) flush_all(1);
    if (interval_us > 0) usleep(interval_us);
  }
  return 0;
}
int launcher_start(const char* sim, int us, int flush) {
  void* h = dlopen(sim, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  launch = (launch_fn)dlsym(h, "msptiSimLaunchKernel");
  flush_all = (flush_fn)dlsym(h, "msptiActivityFlushAll");
  if (!launch || !flush_all) return -2;
  interval_us = us;
  flushing = flush;
  return pthread_create(&thread, 0, run, 0);
}
int launcher_stop(void) {
  atomic_store(&stopping, 1);
  pthread_join(thread, 0);
  return atomic_load(&count);
}
uint64_t launcher_id(int i) { return ids[i]; }
int64_t launcher_start_ns(int i) { return starts[i]; }
"""

LOAD = r"""
import ctypes

def launcher(path):
    lib = ctypes.CDLL(path)
    lib.launcher_start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.launcher_id.restype = ctypes.c_uint64
    lib.launcher_id.argtypes = [ctypes.c_int]
    lib.launcher_start_ns.restype = ctypes.c_int64
    lib.launcher_start_ns.argtypes = [ctypes.c_int]
    return lib
"""


def compile(directory: Path) -> Path | None:
    """Builds liblauncher.so in ``directory``; None when there is no C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src = Path(directory) / "launcher.c"
    src.write_text(SOURCE)
    lib = Path(directory) / "liblauncher.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), "-ldl", "-lpthread"], check=True)
    return lib
