/* Naive histogram: clear, then one increment per element. */
void histogram_optimized(int *data, int *counts, int N, int BINS) {
    for (int b = 0; b < BINS; b++) counts[b] = 0;
    for (int i = 0; i < N; i++) counts[data[i]]++;
}
