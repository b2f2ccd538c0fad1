// folio bench [--config NAME] [--device cpu|cuda] [--steps N] [--warmup N] [--graph=false]
//             [--ladder] [--vocab_size N] [--KEY=VALUE]:
// times full training steps (forward, backward, AdamW) on random tokens and prints one JSON line;
// --ladder times the GPU's optimisations switched on one at a time and prints a table.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "backend/profiling_backend.h"
#include "cli/commands.h"
#include "config/presets.h"
#include "data/batches.h"
#include "distributed/communicator.h"
#include "model/gpt.h"
#include "progress/task_progress.h"
#include "train/mfu.h"
#include "train/training_step.h"

namespace folio {

namespace {

constexpr int kVocabSize = 65;  // tiny-Shakespeare's

struct BenchResult {
  std::string device, description;
  int threads = 0;
  size_t parameters = 0;
  // Of the timed steps: the median, the fastest and the mean wall-clock time; the median CPU
  // time (process_cpu_ms, sorted on its own).
  double median_ms = 0, fastest_ms = 0, mean_ms = 0, median_cpu_ms = 0;
  double tokens_per_step = 0, flops_per_token = 0, peak_flops = 0;
  double rss_before_backend_mib = 0;  // the program and its libraries, before any tensor
  double peak_rss_mib = 0;            // at the end of the timed steps (before any peak probe)
  bool graph = false;
  int batch_split_ways = 1;  // TrainingStep::batch_split_ways
  std::map<std::string, OpTime> profile;  // with --profile: the timed steps' time per op kind
};

// CPU time this process has used, all threads together, in ms. On a machine shared with other
// work, one thread's CPU time per step is what the step costs on a core of its own, where the
// wall-clock time also counts the waits for a turn on the core.
double process_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return 1e3 * static_cast<double>(now.tv_sec) + 1e-6 * static_cast<double>(now.tv_nsec);
}

// The middle value, or the mean of the two middle ones (the upper one alone, with two steps,
// had been the slower).
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2;
}

// The process's peak resident memory so far (getrusage's ru_maxrss is in KiB on Linux).
double peak_resident_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// The process's resident memory now (/proc/self/statm's second field, in pages); 0 if unreadable.
double resident_mib() {
  long pages_total = 0, pages_resident = 0;
  if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    std::fclose(statm);
  }
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

// Times `steps` training steps after `warmup` untimed ones, each on fresh random tokens and
// waited for. With `graph` (and a backend that records steps), the first timed step is recorded
// once after the warm-up and every timed step replays the recording.
BenchResult time_training_steps(const Config& config, const BackendOptions& options, bool graph,
                                int steps, int warmup, bool profile = false,
                                int vocab_size = kVocabSize) {
  const double rss_before_backend = resident_mib();
  std::unique_ptr<Backend> backend = make_backend(config.device, config.threads, options);
  ProfilingBackend* profiler = nullptr;
  if (profile) {
    auto wrapped = std::make_unique<ProfilingBackend>(std::move(backend));
    profiler = wrapped.get();
    backend = std::move(wrapped);
  }
  GPT model(*backend, ModelShape::from_config(config, vocab_size));
  model.initialize(config.seed, config.init_std, config.scaled_residual_init,
                   init_scheme_of(config));
  LocalCommunicator one_process;
  TrainingStep training(model, config, one_process);
  graph = graph && backend->supports_step_capture();
  if (graph) warmup = std::max(warmup, 1);  // scratch memory must exist before recording
  const BatchFiller random_tokens = [&](Batch& batch, uint32_t step, int64_t first_window) {
    fill_random_tokens(batch, config.seed, step, static_cast<uint32_t>(first_window), vocab_size);
  };

  // A long step (gpt2's is 128 micro-batches on a CPU: minutes) shows the steps done on stderr,
  // between steps, outside the timed part; quick runs show nothing (task_progress.h).
  TaskProgress progress("timing training steps", warmup + steps, "steps",
                        StatusLine::standard_error());
  std::vector<double> step_ms, step_cpu_ms;
  for (int step = 0; step < warmup + steps; ++step) {
    training.draw_batches(step, random_tokens);
    if (graph && step == warmup) training.record(step, config.learning_rate);
    if (profiler && step == warmup) profiler->reset();  // the profile covers the timed steps
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_ms();
    if (graph && step >= warmup) {
      training.replay(step, config.learning_rate);
    } else {
      training.compute_gradients(step, /*measure_loss=*/false);
      training.update(config.learning_rate);
    }
    model.mean_loss();  // waits for the device
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step >= warmup) step_ms.push_back(ms), step_cpu_ms.push_back(process_cpu_ms() - cpu_start);
    progress.advance();
  }
  progress.finish();

  BenchResult result;
  result.rss_before_backend_mib = rss_before_backend;
  result.device = backend->name();
  result.description = backend->description();
  result.threads = backend->threads();
  result.parameters = model.parameter_count();
  result.mean_ms = std::accumulate(step_ms.begin(), step_ms.end(), 0.0) / double(step_ms.size());
  result.median_ms = median(step_ms);
  result.fastest_ms = *std::min_element(step_ms.begin(), step_ms.end());
  result.median_cpu_ms = median(step_cpu_ms);
  result.tokens_per_step = static_cast<double>(training.split().global_windows()) *
                           config.block_size;
  result.flops_per_token = training_flops_per_token(model.shape(), model.parameter_count());
  result.graph = graph;
  result.batch_split_ways = training.batch_split_ways();
  if (profiler) result.profile = profiler->times();
  // The step's memory, before the peak probe below allocates its own operands.
  result.peak_rss_mib = peak_resident_mib();
  // A GPU's datasheet peak; a CPU's is measured: its best product speed in this dtype (mfu.h).
  result.peak_flops = backend->peak_flops();
  if (result.peak_flops <= 0) result.peak_flops = measure_matmul_flops(*backend);
  return result;
}

nlohmann::json to_json(const std::string& config_name, const Config& config, int steps,
                       const BenchResult& r) {
  const double tokens_per_s = r.tokens_per_step / (r.median_ms / 1000.0);
  nlohmann::json line = {
      {"config", config_name},
      {"device", r.device},
      {"backend", r.description},
      {"threads", r.threads},
      {"parameters", r.parameters},
      {"batch_size", config.batch_size},
      {"block_size", config.block_size},
      {"steps", steps},
      {"graph", r.graph},
      {"batch_split", r.batch_split_ways},
      {"ms_per_step", r.median_ms},
      {"ms_per_step_min", r.fastest_ms},
      {"cpu_ms_per_step", r.median_cpu_ms},
      {"tokens_per_s", tokens_per_s},
      {"gflops", r.flops_per_token * tokens_per_s / 1e9},
  };
  if (r.peak_flops > 0) {
    // The share of the device's product peak in this dtype that the whole step keeps.
    line["peak_tflops"] = r.peak_flops / 1e12;
    line["mfu"] = model_flops_utilization(tokens_per_s, r.flops_per_token, r.peak_flops);
  }
  line["dtype"] = config.dtype;
  line["peak_rss_mib"] = r.peak_rss_mib;
  // Of it, what the process held before the backend and the model: the program and the shared
  // libraries it loaded, the CUDA ones included in a build with CUDA (about 150 MiB, even when
  // the CPU runs the step), so that a step's own memory is the difference.
  line["rss_before_backend_mib"] = r.rss_before_backend_mib;
  // How OpenMP's threads waited (thread_budget.h): a passive wait makes a small model's step
  // several times slower, so a figure is read with it.
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  line["omp_wait_policy"] = wait_policy != nullptr ? wait_policy : "default";
  return line;
}

// --profile: where a step's time goes, per op kind, from the timed steps (profiling_backend.h).
void print_profile(const BenchResult& r, int steps) {
  double profiled = 0;
  for (const auto& [kind, time] : r.profile) profiled += time.seconds;
  std::vector<std::pair<std::string, OpTime>> rows(r.profile.begin(), r.profile.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  // Every row is a mean over the timed steps, so the shares are of the mean step (of the
  // median, "outside the ops" could read negative).
  const double step_ms = r.mean_ms;
  std::printf(
      "\n%s: per op kind, ms per step (mean of %d timed steps: %.2f ms; median step %.2f ms)\n\n",
      r.description.c_str(), steps, step_ms, r.median_ms);
  std::printf("| op | calls/step | ms/step | share | GFLOP/s |\n|---|---|---|---|---|\n");
  for (const auto& [kind, time] : rows) {
    const double ms = 1000.0 * time.seconds / steps;
    char gflops[32] = "";
    if (time.flops > 0) std::snprintf(gflops, sizeof(gflops), "%.0f", time.flops / time.seconds / 1e9);
    std::printf("| %s | %ld | %.3f | %.1f%% | %s |\n", kind.c_str(), time.calls / steps, ms,
                100.0 * ms / step_ms, gflops);
  }
  const double other_ms = step_ms - 1000.0 * profiled / steps;
  std::printf("| outside the ops (host code, waits) | | %.3f | %.1f%% | |\n", other_ms,
              100.0 * other_ms / step_ms);
  std::fflush(stdout);
}

// The GPU's optimisations, each rung adding one to the rungs before it.
struct Rung {
  const char* name;
  BackendOptions options;
  bool graph;
};

int run_ladder(const std::string& config_name, const Config& config, int steps, int warmup,
               int vocab_size) {
  if (config.device == "cpu" || !cuda_available())
    throw UsageError("--ladder measures a GPU's optimisations and needs one: none is visible");
  const Rung rungs[] = {
      {"fp32", {"fp32", false, false, false}, false},
      {"TF32", {"fp32", true, false, false}, false},
      {"bf16", {"bf16", false, false, false}, false},
      {"fused attention", {"bf16", false, true, false}, false},
      {"fused kernels", {"bf16", false, true, true}, false},
      {"CUDA graph", {"bf16", false, true, true}, true},
  };
  std::vector<BenchResult> results;
  for (const Rung& rung : rungs) {
    results.push_back(time_training_steps(config, rung.options, rung.graph, steps, warmup,
                                          /*profile=*/false, vocab_size));
    nlohmann::json line = to_json(config_name, config, steps, results.back());
    line["rung"] = rung.name;
    line["dtype"] = rung.options.dtype;  // the rung's, not the config's
    line["tf32"] = rung.options.tf32;
    std::cout << line.dump() << std::endl;
  }
  // MFU against one yardstick for every rung: the dense bf16 peak of the last (bf16) rung.
  const double bf16_peak = results.back().peak_flops;
  std::printf("\n%s, %s: each rung adds one optimisation to those above it\n\n",
              config_name.c_str(), results.back().description.c_str());
  std::printf(
      "| rung | ms/step | tokens/s | MFU (of bf16 peak) | speed-up |\n|---|---|---|---|---|\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const BenchResult& r = results[i];
    const double tokens_per_s = r.tokens_per_step / (r.median_ms / 1000.0);
    const double mfu = model_flops_utilization(tokens_per_s, r.flops_per_token, bf16_peak);
    std::printf("| %s | %.2f | %.0f | %.1f%% | %.2fx |\n", rungs[i].name, r.median_ms, tokens_per_s,
                100.0 * mfu, results.front().median_ms / r.median_ms);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int bench_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout
        << "usage: folio bench [--config NAME|FILE] [--device cpu|cuda|auto] [--steps N] "
           "[--warmup N] [--threads N] [--dtype fp32|bf16] [--graph=false] [--ladder] "
           "[--profile] [--vocab_size N] [--KEY=VALUE ...]\n\n"
           "Times training steps after a warm-up and prints one JSON line: config, "
           "device, threads, ms_per_step (the median step), tokens_per_s, gflops, peak_tflops (the "
           "device's matrix-product peak in the dtype; measured on a CPU), mfu (the share "
           "of it the step keeps), peak_rss_mib (the process's peak after the timed steps; "
           "in --ladder, of the rungs so far), rss_before_backend_mib (the program and "
           "its libraries), omp_wait_policy.\n--profile also prints "
           "the step's time per op kind (forward, backward, optimizer), each op waited "
           "for, as a mean over the timed steps.\nOn a GPU the step is recorded once as a CUDA graph and replayed "
           "(--graph=false issues it op by op). --ladder times the GPU's optimisations "
           "one at a time (fp32, TF32, bf16, fused attention, fused kernels, CUDA graph) "
           "and prints a table. --vocab_size sets the random tokens' vocabulary (default 65, "
           "tiny-Shakespeare's; GPT-2's is 50257).\nA step is the config's whole step, all its "
           "grad_accum micro-batches; a long run shows the steps done on stderr.\n";
    return 0;
  }
  const std::string config_name = arguments.take("config").value_or("shakespeare_char");
  int steps = 10, warmup = 2;
  if (auto v = arguments.take_int("steps", 1, 1000000)) steps = static_cast<int>(*v);
  if (auto v = arguments.take_int("warmup", 0, 1000000)) warmup = static_cast<int>(*v);
  int vocab_size = kVocabSize;  // random tokens of this vocabulary (GPT-2's: 50257)
  if (auto v = arguments.take_int("vocab_size", 1, 1 << 24)) vocab_size = static_cast<int>(*v);
  const bool graph_given = arguments.has("graph");
  const bool graph = !graph_given || arguments.take_flag("graph");
  const bool ladder = arguments.take_flag("ladder");
  const bool profile = arguments.take_flag("profile");
  Config config;
  std::vector<std::string> user_keys;  // set by a --config FILE, then by the command line
  arguments.collect([&] { config = load_config(config_name, &user_keys); });
  const std::vector<std::string> bench_options = {"config", "steps",   "warmup",     "graph",
                                                  "ladder", "profile", "vocab_size", "help"};
  const std::vector<std::string> keys = arguments.apply_config_keys(config, bench_options, "bench");
  // The ladder sets each rung's precision, fused kernels and graph itself: what would be
  // silently overridden is refused.
  if (ladder) {
    for (const char* key : {"dtype", "tf32"})
      if (std::find(keys.begin(), keys.end(), key) != keys.end())
        arguments.problem(std::string("--ladder sets ") + key + " rung by rung: drop --" + key);
    if (graph_given) arguments.problem("--ladder records the last rung as a graph: drop --graph");
    if (profile)
      arguments.problem("--ladder times six configurations, --profile one: give one of them");
  }
  arguments.finish("bench", bench_options, false,
                   "the preset is named with --config NAME (e.g. --config tiny)");
  arguments.collect([&] { validate_config(config); });
  user_keys.insert(user_keys.end(), keys.begin(), keys.end());
  arguments.collect([&] { refuse_unused_schedule_keys(config, user_keys); });
  arguments.throw_problems();
  if (config.grad_accum > 1)  // gpt2's step is 524,288 tokens: say so before minutes pass
    std::cerr << "folio bench: a step of " << config_name << " is " << config.grad_accum
              << " micro-batches (grad_accum) of " << config.batch_size << " x "
              << config.block_size << " tokens; --grad_accum=1 times one micro-batch\n";
  if (ladder) return run_ladder(config_name, config, steps, warmup, vocab_size);

  const BenchResult result =
      time_training_steps(config, {config.dtype, config.tf32}, graph, steps, warmup, profile,
                          vocab_size);
  std::cout << to_json(config_name, config, steps, result).dump() << std::endl;
  if (profile) print_profile(result, steps);
  return 0;
}

}  // namespace folio
