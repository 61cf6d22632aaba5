// A shard loader that sizes its buffer from a corrupt header: the allocation throws
// std::bad_alloc, nothing catches it, and the C++ runtime terminates the process.
#include <cstdio>
#include <vector>

int main() {
    std::printf("loading shard 3/8 (declared size 1125899906842624 bytes)\n");
    std::fflush(stdout);
    std::vector<char> buffer(1ULL << 50);
    std::printf("%zu\n", buffer.size());
    return 0;
}
