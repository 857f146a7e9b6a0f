// The task queues of the simulated NPU (internal to the device library): FIFOs of launch tasks,
// each served by one worker thread, like torch_npu's task queue (TASK_QUEUE_ENABLE=1). Tickets
// increase by one per task; a caller can wait until every task up to a ticket has run.
//
// Fork: a forked child (a DataLoader worker) inherits the queues but not their threads. The
// pthread_atfork handlers installed by install_fork_handlers() let no task run across the fork
// (prepare waits for the task in progress), and in the child replace every queue by a fresh one
// whose worker starts with its first task; tasks still queued in the parent do not run in the
// child, and tickets of the parent's queues count as done there.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

namespace torch_mspti::sim {

struct SimEvent;

enum class TaskKind { kKernels, kMemcpy, kCommunication, kEventRecord };

// The collective's strings (a communication launch is rare: owning copies are fine).
struct CommunicationTask {
  std::string name, algType, commName, apiName;
  uint32_t dataType = 0;
  uint64_t count = 0;
  // The message of the "communication" mstx range around the launch ("" for none): what torch_npu's
  // ProcessGroupHCCL opens next to the HCCL call (docs/torch_npu.md 5).
  std::string mstxMessage;
};

struct Task {
  TaskKind kind = TaskKind::kKernels;
  const char* name = nullptr;  // kernels: interned kernel name and type
  const char* type = nullptr;
  int device = 0;
  int64_t stream = 0;
  uint64_t duration = 0;  // total device time of the task, ns
  uint32_t count = 1;     // kernels covered by one launch
  uint32_t copyKind = 0;  // memcpy: msptiActivityMemcpyKind
  uint64_t bytes = 0;     // memcpy
  SimEvent* event = nullptr;
  std::shared_ptr<const CommunicationTask> communication;
  uint64_t notBefore = 0;  // CLOCK_REALTIME ns: the worker launches no earlier
};

class TaskQueue {
 public:
  using Executor = void (*)(const Task&);
  explicit TaskQueue(Executor run) : run_(run) {}
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Enqueues `task`; returns its ticket. Starts the worker on first use.
  uint64_t push(Task task);
  // Blocks until the task with `ticket` (and every earlier one) has run.
  void wait(uint64_t ticket);
  // Blocks until every task pushed so far has run.
  void drain();
  bool done(uint64_t ticket);
  // Deepest the queue has been.
  uint64_t maxDepth();

  // Fork handlers' hooks: no task runs between lockForFork() and unlockAfterFork().
  void lockForFork() { running_.lock(); }
  void unlockAfterFork() { running_.unlock(); }

 private:
  void loop();

  const Executor run_;
  std::mutex mu_;
  std::mutex running_;  // held while a task runs
  std::condition_variable cv_, done_cv_;
  std::deque<Task> tasks_;
  uint64_t pushed_ = 0, done_ = 0, max_depth_ = 0;
  bool started_ = false;
};

// The launch queue (queued mode) and the housekeeping thread's queue; each replaced in a forked
// child. Never destroyed (their threads outlive static destructors).
TaskQueue& launch_queue();
TaskQueue& housekeeping_queue();
// Creates both queues with `run` as their executor and installs the fork handlers; once.
void init_task_queues(TaskQueue::Executor run);

}  // namespace torch_mspti::sim
