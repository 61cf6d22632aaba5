"""Cache decoded samples in RAM until the process's memory limit stops it."""
cache = []
for i in range(1000):
    cache.append(bytearray(64 << 20))
    if i % 4 == 0:
        print("cached %d MiB" % ((i + 1) * 64), flush=True)
