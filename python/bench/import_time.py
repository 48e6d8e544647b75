"""Time of `import hipjit` in fresh interpreters (nothing is compiled or loaded at import),
beside `import ctypes` (a standard-library extension module) measured the same way in the
same run. Each figure: the median of N fresh processes, time.perf_counter around the import.

Usage: python import_time.py [N]   (default 21)
"""

import statistics
import subprocess
import sys

CODE = "import time; t = time.perf_counter(); import %s; print((time.perf_counter() - t) * 1e3)"


def import_ms(module):
    """Milliseconds `import module` takes in a fresh interpreter."""
    r = subprocess.run([sys.executable, "-c", CODE % module], check=True, capture_output=True,
                       text=True)
    return float(r.stdout)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    results = {}
    for _ in range(n):
        for module in ("hipjit", "ctypes"):
            results.setdefault(module, []).append(import_ms(module))
    h, c = statistics.median(results["hipjit"]), statistics.median(results["ctypes"])
    print("BENCH import hipjit: median %.2f ms (min %.2f, max %.2f) over %d fresh processes; "
          "import ctypes %.2f ms; ratio %.2f"
          % (h, min(results["hipjit"]), max(results["hipjit"]), n, c, h / c))


if __name__ == "__main__":
    main()
