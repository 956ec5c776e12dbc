// Separates one recording with a trained Nabu experiment or an exported model file:
//   separate_file <experiment folder | model.pt> <recording> <output prefix>
// writes <output prefix>_s1.wav, _s2.wav, ... at the recording's rate and level.
#include <nabu/separator.h>

#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: separate_file <experiment folder | model.pt> <recording> <prefix>\n";
    return 2;
  }
  try {
    const std::string model = argv[1];
    nabu::api::SeparatorOptions options;
    options.threads = 1;
    auto separator = std::filesystem::is_directory(model)
                         ? nabu::api::Separator::from_experiment(model, options)
                         : nabu::api::Separator::from_exported(model, options);
    const auto recording = nabu::api::read_audio(argv[2]);
    const auto speakers = separator.separate(recording.samples, recording.sample_rate);
    for (std::size_t s = 0; s < speakers.size(); ++s) {
      const std::string out = std::string(argv[3]) + "_s" + std::to_string(s + 1) + ".wav";
      nabu::api::write_audio(out, speakers[s], recording.sample_rate);
      std::cout << out << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "separate_file: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
