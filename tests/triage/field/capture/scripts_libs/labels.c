/* A loss kernel's bounds check: a label outside [0, n_classes) trips the C assert. */
#include <assert.h>
#include <stdio.h>

int main(void) {
    int n_classes = 10;
    int labels[4] = {3, 7, 12, 1};
    for (int i = 0; i < 4; i++) {
        printf("sample %d label %d\n", i, labels[i]);
        fflush(stdout);
        assert(labels[i] < n_classes);
    }
    return 0;
}
