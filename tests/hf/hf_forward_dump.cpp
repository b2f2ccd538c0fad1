// What the Hugging Face GPT-2 comparison (test_hf_gpt2.py) checks of a folio checkpoint: the
// logits and mean loss of one token sequence (inputs = ids[:-1], targets = ids[1:]) and the greedy
// continuation of a prompt, through folio's own forward and generate() on the CPU.
//
//   folio_hf_forward_dump --ckpt FILE --ids 1,2,3,... --prompt_ids 4,5 --new_tokens N --out FILE
#include <iostream>
#include <sstream>

#include "cli/arguments.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "model/gpt.h"

using namespace folio;

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Arguments arguments(argc, argv, 1);
    const std::string path = arguments.take("ckpt").value_or("");
    const std::vector<int32_t> ids = parse_ids(arguments.take("ids").value_or(""));
    const std::vector<int32_t> prompt = parse_ids(arguments.take("prompt_ids").value_or(""));
    const int new_tokens = std::stoi(arguments.take("new_tokens").value_or("8"));
    const std::string out = arguments.take("out").value_or("");
    arguments.finish("hf_forward_dump", {});
    if (path.empty() || out.empty() || ids.size() < 2)
      throw Error("usage: --ckpt FILE --ids A,B,... --prompt_ids A,... --new_tokens N --out FILE");

    const LoadedCheckpoint checkpoint = load_checkpoint(path, Config{}, nullptr);
    auto backend = make_backend("cpu", 0);
    GPT model(*backend, checkpoint.shape);
    checkpoint.parameters->write_into(model);

    const int T = static_cast<int>(ids.size()) - 1, V = checkpoint.shape.vocab_size;
    const std::vector<int32_t> inputs(ids.begin(), ids.end() - 1),
        targets(ids.begin() + 1, ids.end());
    model.forward(inputs.data(), targets.data(), 1, T, DropoutContext{});
    const float loss = model.mean_loss();
    const std::vector<float> logits = model.read_logits();

    SamplingOptions greedy;
    greedy.max_new_tokens = new_tokens;
    greedy.temperature = 0.0;
    const std::vector<int32_t> generated = generate(model, prompt, greedy, 0, [](int32_t) {});
    const std::vector<float> generated_values(generated.begin(), generated.end());

    write_safetensors(
        out,
        {{"logits", {1, T, V}, logits.data()},
         {"loss", {1}, &loss},
         {"generated", {static_cast<int64_t>(generated.size())}, generated_values.data()}},
        {});
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "folio_hf_forward_dump: " << error.what() << "\n";
    return 1;
  }
}
