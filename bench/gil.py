# SPDX-License-Identifier: BSD-2-Clause
# A GIL-bound threaded python3 program for bench/preload_ab.py: four threads each run a
# pure-python loop, so CPython's GIL (a pthread mutex + condvar pair) changes hands every
# switch interval. Prints the sum (the same on both sides: preload_ab compares outputs).
#   python3 bench/gil.py [STEPS]
import sys
import threading

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 6000000  # loop steps per thread: about 1 s in all
THREADS = 4  # more threads than the 2 CPUs of the CI machine
sums = [0] * THREADS


def work(k):
    s = 0
    for i in range(STEPS):
        s += i % 7
    sums[k] = s


ts = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(sum(sums))
