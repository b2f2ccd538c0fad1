// What the optimizer checks compare with independent oracles (tests/torch/check_lr_schedule.py,
// tests/torch/compare_adamw.py):
//
//   folio_optimizer_dump schedule --config NAME [--KEY=VALUE ...] --steps N
//       prints {"learning_rates": [learning_rate_at(config, 0), ..., (N - 1)]} as JSON;
//   folio_optimizer_dump adamw --config NAME [--KEY=VALUE ...] --steps K --out DIR
//       trains K steps on one fixed batch and writes DIR/adamw.safetensors under the seed's
//       names: weights.0.* (initial), and for each step k = 1..K the gradients before clipping
//       (grad.k.*), and after the step the weights (weights.k.*) and AdamW's two moments
//       (exp_avg.k.*, exp_avg_sq.k.*); the metadata holds the config and each step's learning rate.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/arguments.h"
#include "config/presets.h"
#include "core/error.h"
#include "core/text_format.h"
#include "io/safetensors.h"
#include "io/torch_names.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"

using namespace folio;

namespace {

std::vector<float> read_device(Backend& backend, const float* device, size_t n) {
  std::vector<float> host(n);
  backend.copy_to_host(host.data(), device, n * sizeof(float));
  return host;
}

void add_named(std::vector<NamedTensor>& out, const std::string& prefix, const GPT& model,
               const std::vector<float>& flat) {
  for (NamedTensor& t : to_seed_state_dict(model.shape(), model.layout(), flat)) {
    t.name = prefix + t.name;
    out.push_back(std::move(t));
  }
}

void dump_adamw(const Config& c, int steps, const std::string& out_dir) {
  std::filesystem::create_directories(out_dir);
  const int V = 65, B = c.batch_size, T = c.block_size;
  auto backend = make_backend("cpu", 0, {c.dtype, c.tf32});
  GPT model(*backend, ModelShape::from_config(c, V));
  model.initialize(c.seed, c.init_std, c.scaled_residual_init);
  std::vector<int32_t> inputs(size_t(B) * T), targets(size_t(B) * T);
  const RandomStream stream = make_stream(c.seed, RandomPurpose::kTrainBatch, 98, 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = static_cast<int32_t>(stream.word(2 * i) % V);
    targets[i] = static_cast<int32_t>(stream.word(2 * i + 1) % V);
  }
  model.plan(B, T, true);
  AdamW optimizer(model, c);
  const size_t n = model.parameter_count();
  DeviceBuffer squared_norm(*backend, sizeof(float));  // what clipping reads
  std::vector<NamedTensor> out;
  add_named(out, "weights.0.", model, model.read_parameters());
  std::string learning_rates;
  for (int step = 0; step < steps; ++step) {
    const std::string k = std::to_string(step + 1) + ".";
    model.forward(inputs.data(), targets.data(), B, T, DropoutContext{});
    model.backward(1.0f / (B * T), GradientUpdate::kWrite);
    add_named(out, "grad." + k, model, model.read_gradients());
    backend->sum_of_squares(squared_norm.as<float>(), model.gradients(), n);
    optimizer.step(learning_rate_at(c, step), squared_norm.as<float>());
    if (step > 0) learning_rates += ',';
    learning_rates += shortest_double(learning_rate_at(c, step));
    add_named(out, "weights." + k, model, model.read_parameters());
    add_named(out, "exp_avg." + k, model, read_device(*backend, optimizer.first_moment(), n));
    add_named(out, "exp_avg_sq." + k, model, read_device(*backend, optimizer.second_moment(), n));
  }
  std::vector<TensorToWrite> tensors;
  for (const NamedTensor& t : out) tensors.push_back({t.name, t.shape, t.values.data()});
  write_safetensors(out_dir + "/adamw.safetensors", tensors,
                    {{"config", config_to_json(c).dump()}, {"learning_rates", learning_rates}});
  std::cout << "wrote " << out_dir << "/adamw.safetensors\n";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode != "schedule" && mode != "adamw")
      throw Error("the first argument is schedule or adamw");
    Arguments arguments(argc, argv, 2);
    const std::string out_dir = arguments.take("out").value_or("");
    const int steps = parse_int_option("steps", arguments.take("steps").value_or("6"), 1, 1000000);
    Config c = load_config(arguments.take("config").value_or("tiny"));
    arguments.apply_config_keys(c, {"out", "config", "steps"}, "dump_optimizer");
    validate_config(c);
    if (mode == "schedule") {
      nlohmann::json rates = nlohmann::json::array();
      for (int step = 0; step < steps; ++step) rates.push_back(learning_rate_at(c, step));
      std::cout << nlohmann::json{{"learning_rates", rates}}.dump() << "\n";
      return 0;
    }
    if (out_dir.empty()) throw Error("--out DIR is required");
    dump_adamw(c, steps, out_dir);
    return 0;
  } catch (const Error& error) {
    std::cerr << "folio_optimizer_dump: " << error.what() << "\n";
    return 1;
  }
}
