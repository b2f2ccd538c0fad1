// folio import --hf DIR --out FILE and folio export --ckpt FILE --hf DIR: Hugging Face GPT-2
// folders (io/hf_gpt2.h) to folio checkpoints and back.
#include <filesystem>
#include <iostream>

#include "cli/checkpoint_session.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/text_dataset.h"
#include "io/checkpoint.h"
#include "io/hf_gpt2.h"
#include "io/whole_file.h"
#include "model/parameter_layout.h"
#include "tokenizer/tokenizer.h"

namespace folio {

namespace {

constexpr const char* kImportHelp =
    "usage: folio import --hf DIR --out FILE.safetensors [--tokenizer gpt2|DIR|FILE] [--force] "
    "[--KEY=VALUE ...]\n\n"
    "Reads a Hugging Face GPT-2 model folder (GPT2LMHeadModel: config.json and "
    "model.safetensors, as save_pretrained\nwrites them) and writes a folio checkpoint that "
    "`folio info`, `eval`, `sample` and `train --init_from` read.\nThe structure comes from "
    "config.json (n_layer, n_head, n_embd, n_positions as block_size, vocab_size,\n"
    "activation_function: gelu_new is gelu_tanh); config keys on the command line set the "
    "training recipe\nstored with it (default: the gpt2 preset's). The tokenizer travels with "
    "the model: DIR's tokenizer.json\n(or vocab.json + merges.txt), or --tokenizer. What folio "
    "cannot compute exactly (another attention scaling,\na different LayerNorm eps, n_inner other "
    "than 4 * n_embd...) is refused, naming the key. pytorch_model.bin is not\nread: the error "
    "says how to convert it. An existing FILE is replaced only with --force.\n";

constexpr const char* kExportHelp =
    "usage: folio export --ckpt FILE --hf DIR [--force]\n\n"
    "Writes a folio checkpoint as a Hugging Face GPT-2 folder: DIR/model.safetensors (HF's names, "
    "Conv1D\nweights transposed, metadata format pt), DIR/config.json (model_type gpt2) and "
    "DIR/tokenizer.json when the\nmodel has a BPE tokenizer, so that "
    "transformers.GPT2LMHeadModel.from_pretrained(DIR) and AutoTokenizer load it.\nBiases folio's "
    "model lacks are written as zeros (the same model); what GPT-2 cannot hold (heads narrower "
    "than\nn_embd, a non-zero lm_head bias) is refused. An existing DIR/model.safetensors, config.json "
    "or\ntokenizer.json is replaced only with --force (a char model's export removes a "
    "tokenizer.json there, and lists its\ncharacters in config.json as folio_characters, which "
    "folio import reads back).\n";

std::string count_text(size_t n) {
  return n >= 1000000 ? std::to_string((n + 500000) / 1000000) + "M" : std::to_string(n);
}

}  // namespace

int import_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << kImportHelp;
    return 0;
  }
  const auto dir = arguments.take("hf");
  const auto out = arguments.take("out");
  const auto tokenizer_spec = arguments.take("tokenizer");
  const bool force = arguments.take_flag("force");
  if (!dir) arguments.problem("folio import needs --hf DIR, the Hugging Face model folder");
  if (!out) arguments.problem("folio import needs --out FILE.safetensors, the checkpoint to write");
  // The recipe stored with the model: the gpt2 preset's, then the command line's keys.
  Config base = hf_gpt2_base_config();
  const std::vector<std::string> options = {"hf", "out", "tokenizer", "force", "help"};
  const std::vector<std::string> given = arguments.apply_config_keys(base, options, "import");
  arguments.collect([&] { validate_config(base); });  // a recipe at odds with itself, as in train
  arguments.collect([&] { refuse_unused_schedule_keys(base, given); });
  arguments.finish("import", options);
  check_new_output_file(*out, force, "--out");

  HfGpt2Model model = read_hf_gpt2(*dir, base);
  // A key that config.json decides (the structure, the dropout rates) would be overridden
  // silently: say so instead.
  std::string overridden;
  for (const std::string& name : given) {
    const ConfigKey& key = *find_config_key(name);
    const std::string asked = get_config_value(base, key);
    const std::string read = get_config_value(model.config, key);
    if (asked == read) continue;
    if (!overridden.empty()) overridden += '\n';
    overridden += "--" + name + " " + asked + ": " + *dir + "/config.json makes it " + read +
                  "; drop --" + name;
  }
  if (!overridden.empty()) throw UsageError(overridden);
  if (tokenizer_spec) {
    model.tokenizer = Tokenizer::load(*tokenizer_spec);
    check_tokenizer_fits(*model.tokenizer, model.shape, "the tokenizer " + *tokenizer_spec);
  }
  if (!model.tokenizer)
    throw Error(*dir +
                " has no tokenizer (tokenizer.json, or vocab.json + merges.txt): copy it "
                "there, or pass --tokenizer gpt2 for GPT-2's own");
  save_checkpoint(*out, model.shape, model.parameters, model.config, *model.tokenizer, -1, -1, -1);
  std::cout << "imported " << *dir << " as " << *out << ": GPT-2 with " << model.shape.n_layer
            << " layers, " << model.shape.n_head << " heads, n_embd " << model.shape.n_embd
            << ", block_size " << model.shape.block_size << ", " << model.shape.vocab_size
            << " tokens, " << model.config.activation << ", "
            << count_text(ParameterLayout(model.shape).saved_total())  // without vocabulary padding
            << " parameters; tokenizer: " << model.tokenizer->description() << "\n";
  return 0;
}

int export_command(Arguments& arguments) {
  if (arguments.take_flag("help")) {
    std::cout << kExportHelp;
    return 0;
  }
  const auto checkpoint_path = arguments.take("ckpt");
  const auto dir = arguments.take("hf");
  const bool force = arguments.take_flag("force");
  if (!checkpoint_path)
    arguments.problem("folio export needs --ckpt FILE, the checkpoint to export");
  if (!dir) arguments.problem("folio export needs --hf DIR, the folder to write");
  Config base;
  const std::vector<std::string> options = {"ckpt", "hf", "force", "help"};
  const std::vector<std::string> given = arguments.apply_config_keys(base, options, "export");
  arguments.finish("export", options);

  std::optional<TextDataset> data;
  if (!base.data.empty()) data = load_text_dataset(base.data, base.train_fraction);
  const LoadedCheckpoint checkpoint =
      load_checkpoint(*checkpoint_path, base, data ? &data->vocabulary : nullptr);
  check_keys_for_checkpoint(given, base, checkpoint, "export", {"train_fraction"});
  const std::vector<float> parameters = checkpoint.parameters->read_all();  // the export needs them
  // The files an export writes (or, tokenizer.json for a char model, removes): an earlier
  // model's config.json or tokenizer.json is no less someone's work than its weights.
  for (const char* name : {"model.safetensors", "config.json", "tokenizer.json"})
    check_new_output_file((std::filesystem::path(*dir) / name).string(), force, "--hf DIR");
  try {
    write_hf_gpt2(*dir, checkpoint.config, checkpoint.shape, parameters, checkpoint.tokenizer);
  } catch (const Error& error) {
    throw Error("cannot export " + *checkpoint_path + " as GPT-2: " + error.what());
  }
  std::cout << "exported " << *checkpoint_path << " to " << *dir
            << " (model.safetensors, config.json"
            << (checkpoint.tokenizer.bpe() ? ", tokenizer.json" : "") << ")\n";
  if (checkpoint.tokenizer.is_characters())
    std::cout << "note: the model's vocabulary (" << checkpoint.tokenizer.description()
              << ") is no GPT-2 tokenizer, so no tokenizer file was written; config.json lists "
                 "its characters in id order (folio_characters), which folio import and "
                 "train --init_from read back\n";
  return 0;
}

}  // namespace folio
