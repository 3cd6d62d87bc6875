// A small persistent thread pool for the native ops (attention, weight products, elementwise
// ops): each call's tasks are taken one at a time from an atomic counter by the calling thread and
// the pool's workers, which spin for a while between calls before they sleep (threads.cc).
// Size: SPARQ_THREADS, else the hardware's.
#pragma once
#include <cstddef>
#include <functional>

namespace sparq {

// Threads used by parallel_for (the caller counts as one).
int pool_threads();
// Resizes the pool (1 = run everything on the calling thread).
void set_pool_threads(int n);
// Runs task(i) for i in [0, n); returns when all are done. An exception thrown by
// a task is rethrown here, on the calling thread.
void parallel_for(size_t n, const std::function<void(size_t)>& task);

// parallel_for for a call of `elements` elements of work, or the same tasks on the calling thread
// alone when there are few: waking the pool costs microseconds, and 2^16 f32 (256 KiB) is about
// 20 us of reading at memory's speed, the same order as a thread hand-off.
template <class Run>
void run_tasks(size_t tasks, double elements, Run run) {
  constexpr double kMinParallelElements = 1 << 16;
  if (elements < kMinParallelElements) {
    for (size_t task = 0; task < tasks; task++) run(task);
  } else {
    parallel_for(tasks, run);
  }
}

}  // namespace sparq
