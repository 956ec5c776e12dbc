#include "nabu/neuralnetworks/models/model_bank.h"

#include <H5Cpp.h>

#include <sstream>

#include "nabu/core/error.h"
#include "nabu/core/fs.h"
#include "nabu/core/strings.h"

namespace nabu {

namespace {

std::string shape_text(const torch::Tensor& tensor) {
  std::ostringstream out;
  out << tensor.sizes();
  return out.str();
}

}  // namespace

bool is_single_model_format(const ConfigFile& model_cfg) {
  return !model_cfg.has_section("hyper") &&
         (model_cfg.has_section("io") || model_cfg.has_section("model"));
}

namespace {

// Collects the problems of [hyper] model_names and each named section; with `build`, creates
// the models into `models` (throwing on the first problem instead).
std::vector<std::string> visit_models(const ConfigFile& model_cfg, bool build,
                                      std::vector<std::string>* names,
                                      std::map<std::string, ModelPtr>* models) {
  std::vector<std::string> problems;
  auto report = [&](const std::string& message) {
    if (build) throw ConfigError(message);
    problems.push_back(message);
  };
  const ConfigSection* hyper = model_cfg.find_section("hyper");
  if (!hyper) {
    if (is_single_model_format(model_cfg)) {
      const std::filesystem::path recipe = std::filesystem::path(model_cfg.path()).parent_path();
      report(model_cfg.path() + ": the older single-model format ([io] and [model], no [hyper]); "
             "convert the recipe with: nabu recipe upgrade " + recipe.string() + " " +
             recipe.string() + "_upgraded");
    } else {
      report(model_cfg.path() + ": no [hyper] section (it lists model_names)");
    }
    return problems;
  }
  if (!hyper->has("model_names")) {
    report(hyper->missing_key_message("model_names"));
    return problems;
  }
  std::set<std::string> seen;
  for (const auto& name : hyper->get_list("model_names")) {
    if (!seen.insert(name).second) {
      report(hyper->where("model_names") + ": model '" + name + "' is listed twice");
      continue;
    }
    const ConfigSection* section = model_cfg.find_section(name);
    if (!section) {
      report(hyper->where("model_names") + ": model '" + name + "' has no section" +
             did_you_mean(name, model_cfg.section_names()));
      continue;
    }
    if (!section->has("architecture")) {
      report(section->missing_key_message("architecture"));
      continue;
    }
    std::string architecture = trim(section->get_string("architecture"));
    if (!model_registry().contains(architecture)) {
      report(section->where("architecture") + ": " +
             model_registry().unknown_message(architecture));
      continue;
    }
    if (build) {
      names->push_back(name);
      (*models)[name] = model_registry().create(architecture, name, *section);
    } else {
      for (auto& message : model_registry().check(architecture, *section))
        problems.push_back(message);
    }
  }
  return problems;
}

}  // namespace

std::string ParameterLoadReport::summary() const {
  std::ostringstream out;
  out << loaded.size() << " parameter(s) loaded, " << skipped.size() << " skipped, "
      << missing.size() << " not in the file";
  for (const auto& [name, reason] : skipped) out << "\n  skipped " << name << ": " << reason;
  for (const auto& name : missing) out << "\n  not in the file: " << name;
  return out.str();
}

ModelBank::ModelBank(const ConfigFile& model_cfg) {
  visit_models(model_cfg, true, &names_, &models_);
}

std::vector<std::string> ModelBank::check(const ConfigFile& model_cfg) {
  return visit_models(model_cfg, false, nullptr, nullptr);
}

const ModelPtr& ModelBank::get(const std::string& name) const {
  auto it = models_.find(name);
  if (it == models_.end())
    throw Error("unknown model '" + name + "'" + did_you_mean(name, names_) +
                "; model.cfg [hyper] model_names has: " + join(names_, ", "));
  return it->second;
}

std::vector<std::string> ModelBank::unbuilt(const std::set<std::string>& names) const {
  std::vector<std::string> result;
  for (const auto& name : names_)
    if ((names.empty() || names.count(name)) && !models_.at(name)->built()) result.push_back(name);
  return result;
}

std::vector<torch::Tensor> ModelBank::parameters(const std::set<std::string>& names,
                                                 bool trainable_only) const {
  for (const auto& name : names) get(name);  // unknown names are an error
  std::vector<torch::Tensor> result;
  for (const auto& name : names_) {
    if (!names.empty() && !names.count(name)) continue;
    const auto& model = models_.at(name);
    if (trainable_only && !model->trainable()) continue;
    for (const auto& parameter : model->parameters()) result.push_back(parameter);
  }
  return result;
}

std::vector<std::pair<std::string, torch::Tensor>> ModelBank::named_parameters(
    const std::set<std::string>& names) const {
  for (const auto& name : names) get(name);
  std::vector<std::pair<std::string, torch::Tensor>> result;
  for (const auto& name : names_) {
    if (!names.empty() && !names.count(name)) continue;
    for (const auto& item : models_.at(name)->named_parameters())
      result.emplace_back(name + "." + item.key(), item.value());
  }
  return result;
}

int64_t ModelBank::parameter_count(const std::string& name) const {
  int64_t count = 0;
  for (const auto& parameter : get(name)->parameters()) count += parameter.numel();
  return count;
}

std::string ModelBank::summary() const {
  std::ostringstream out;
  int64_t total = 0;
  for (const auto& name : names_) {
    const auto& model = models_.at(name);
    int64_t count = parameter_count(name);
    total += count;
    out << "model '" << name << "' (" << model->architecture() << "): ";
    if (!model->built())
      out << "not built yet";
    else
      out << count << " parameters" << (model->trainable() ? "" : ", not trainable");
    out << "\n";
    for (const auto& item : model->named_parameters())
      out << "  " << name << "." << item.key() << " " << shape_text(item.value()) << " "
          << item.value().numel() << "\n";
  }
  out << "total: " << total << " parameters";
  return out.str();
}

std::map<std::string, torch::Tensor> ModelBank::state() const {
  std::map<std::string, torch::Tensor> result;
  for (const auto& [name, tensor] : named_parameters())
    result[name] = tensor.detach().clone();
  return result;
}

void ModelBank::to(const torch::Device& device) {
  for (const auto& name : names_) models_.at(name)->to(device);
  device_ = device;
}

void write_parameter_file(const std::filesystem::path& path,
                          const std::map<std::string, torch::Tensor>& parameters) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : parameters) dict.insert(name, tensor.detach().cpu().contiguous());
  auto bytes = torch::pickle_save(dict);
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
}

namespace {

// An HDF5 file of named float datasets at its root (tools/convert_tf_checkpoint writes them from
// the original's TensorFlow checkpoints): each dataset one parameter, its name the parameter's.
std::map<std::string, torch::Tensor> read_hdf5_parameters(const std::filesystem::path& path) {
  std::map<std::string, torch::Tensor> tensors;
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path.string(), H5F_ACC_RDONLY);
    H5::Group root = file.openGroup("/");
    for (hsize_t i = 0; i < root.getNumObjs(); ++i) {
      const std::string name = root.getObjnameByIdx(i);
      if (root.childObjType(name) != H5O_TYPE_DATASET)
        throw Error("'" + name + "' is not a dataset (parameters are datasets at the root)");
      H5::DataSet dataset = root.openDataSet(name);
      if (dataset.getTypeClass() != H5T_FLOAT)
        throw Error("dataset '" + name + "' does not hold floating-point numbers");
      H5::DataSpace space = dataset.getSpace();
      std::vector<hsize_t> dims(static_cast<std::size_t>(space.getSimpleExtentNdims()));
      space.getSimpleExtentDims(dims.data());
      std::vector<int64_t> shape(dims.begin(), dims.end());
      auto tensor = torch::empty(shape, torch::kFloat32);
      if (tensor.numel() > 0) dataset.read(tensor.data_ptr<float>(), H5::PredType::NATIVE_FLOAT);
      tensors[name] = tensor;
    }
  } catch (const H5::Exception& e) {
    throw Error(path.string() + ": not a readable HDF5 parameter file: " + e.getDetailMsg());
  } catch (const Error& e) {
    throw Error(path.string() + ": not a model parameter file: " + e.what());
  }
  return tensors;
}

}  // namespace

std::map<std::string, torch::Tensor> read_parameter_file(const std::filesystem::path& path) {
  std::string bytes = read_file(path);
  if (bytes.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0) return read_hdf5_parameters(path);
  std::map<std::string, torch::Tensor> tensors;
  try {
    auto value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    if (!value.isGenericDict()) throw Error("not a dictionary of tensors");
    for (const auto& item : value.toGenericDict()) {
      if (!item.key().isString() || !item.value().isTensor())
        throw Error("an entry is not a named tensor");
      tensors[item.key().toStringRef()] = item.value().toTensor();
    }
  } catch (const Error& e) {
    throw Error(path.string() + ": not a model parameter file: " + e.what());
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    // A module's class in the pickle: TorchScript, which nabu export writes (the shipped models).
    if (what.find("Unpickler found unknown type") != std::string::npos)
      throw Error(path.string() + ": a TorchScript file (nabu export writes them; the shipped "
                  "models are them), not the parameters of a training: this takes an "
                  "experiment's <expdir>/<stage>/model/model.pt, e.g. exp/demo/full/model/model.pt");
    throw Error(path.string() + ": not a model parameter file: " + what);
  }
  return tensors;
}

void ModelBank::save(const std::filesystem::path& path) const {
  auto missing = unbuilt();
  if (!missing.empty())
    throw Error("cannot save the models to " + path.string() + ": not built yet: " +
                join(missing, ", ") + " (run a forward pass first)");
  std::map<std::string, torch::Tensor> parameters;
  for (const auto& [name, tensor] : named_parameters()) parameters[name] = tensor;
  write_parameter_file(path, parameters);
}

ParameterLoadReport ModelBank::load(const std::filesystem::path& path, bool strict) {
  auto tensors = read_parameter_file(path);
  try {
    return load_tensors(tensors, strict);
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
}

ParameterLoadReport ModelBank::load_tensors(const std::map<std::string, torch::Tensor>& tensors,
                                            bool strict) {
  ParameterLoadReport report;
  std::map<std::string, torch::Tensor> targets;
  for (const auto& [name, tensor] : named_parameters()) targets[name] = tensor;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  for (const auto& [name, tensor] : tensors) {
    auto it = targets.find(name);
    if (it == targets.end()) {
      std::string model = name.substr(0, name.find('.'));
      std::string reason = !has(model)       ? "no model '" + model + "' in the bank"
                           : !get(model)->built() ? "model '" + model + "' is not built yet"
                                                   : "no such parameter";
      report.skipped.emplace_back(name, reason);
      continue;
    }
    if (!it->second.sizes().equals(tensor.sizes())) {
      report.skipped.emplace_back(name, "shape " + shape_text(tensor) + " in the file, " +
                                            shape_text(it->second) + " in the model");
      continue;
    }
    copies.emplace_back(it->second, tensor);
    report.loaded.push_back(name);
  }
  for (const auto& [name, tensor] : targets)
    if (!tensors.count(name)) report.missing.push_back(name);
  for (const auto& name : unbuilt()) report.missing.push_back(name + ".* (not built yet)");
  if (strict && !report.complete())
    throw Error("the parameters do not match the models: " + report.summary());
  torch::NoGradGuard no_grad;
  for (auto& [target, source] : copies) target.copy_(source.to(target.device(), target.dtype()));
  return report;
}

}  // namespace nabu
