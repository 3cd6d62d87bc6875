/*
 * The ggml oracle: quantizes f32 rows with llama.cpp's own libggml-base (the library
 * node-llama-cpp ships), through ggml_quantize_chunk without an importance matrix: the path
 * llama-quantize takes. Then dequantizes those blocks with ggml's dequantize_row_<type>.
 *
 *   ggml-oracle LIB TYPE_ID N_PER_ROW DEQUANTIZE_SYMBOL < f32 rows > blocks, then f32 values
 *
 * Symbols are looked up at run time (dlopen), so no ggml header is needed.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row, const float *imatrix);
typedef size_t (*row_size_fn)(int type, int64_t ne);
typedef void (*dequantize_row_fn)(const void *blocks, float *out, int64_t k);

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ggml-oracle LIB TYPE_ID N_PER_ROW DEQUANTIZE_SYMBOL\n");
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  quantize_chunk_fn quantize_chunk = (quantize_chunk_fn)dlsym(lib, "ggml_quantize_chunk");
  row_size_fn row_size = (row_size_fn)dlsym(lib, "ggml_row_size");
  dequantize_row_fn dequantize_row = (dequantize_row_fn)dlsym(lib, argv[4]);
  if (!quantize_chunk || !row_size || !dequantize_row) {
    fprintf(stderr, "missing symbol (ggml_quantize_chunk, ggml_row_size or %s)\n", argv[4]);
    return 2;
  }
  const int type = atoi(argv[2]);
  const int64_t n_per_row = atoll(argv[3]);

  size_t capacity = 1 << 16, count = 0, got;
  float *x = malloc(capacity * sizeof(float));
  while ((got = fread(x + count, sizeof(float), capacity - count, stdin)) > 0) {
    count += got;
    if (count == capacity) x = realloc(x, (capacity *= 2) * sizeof(float));
  }
  const int64_t rows = (int64_t)count / n_per_row;
  const size_t bytes = row_size(type, n_per_row) * (size_t)rows;
  uint8_t *blocks = malloc(bytes);
  float *back = malloc(count * sizeof(float));
  quantize_chunk(type, x, blocks, 0, rows, n_per_row, NULL);
  dequantize_row(blocks, back, (int64_t)count);
  fwrite(blocks, 1, bytes, stdout);
  fwrite(back, sizeof(float), count, stdout);
  return 0;
}
