#include "nabu/processing/wav_header.h"

#include <algorithm>
#include <array>
#include <fstream>

#include "nabu/core/error.h"

namespace nabu {

namespace {

uint32_t little_endian_32(const unsigned char* bytes) {
  return uint32_t(bytes[0]) | uint32_t(bytes[1]) << 8 | uint32_t(bytes[2]) << 16 |
         uint32_t(bytes[3]) << 24;
}

uint16_t little_endian_16(const unsigned char* bytes) {
  return uint16_t(bytes[0] | bytes[1] << 8);
}

}  // namespace

WavHeader read_wav_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot be read");
  std::error_code ec;
  const auto file_size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) throw DataError(path.string() + ": cannot be read (" + ec.message() + ")");
  std::array<unsigned char, 12> riff{};
  if (!in.read(reinterpret_cast<char*>(riff.data()), riff.size()) ||
      std::string(riff.begin(), riff.begin() + 4) != "RIFF" ||
      std::string(riff.begin() + 8, riff.end()) != "WAVE")
    throw DataError(path.string() + ": not a RIFF/WAVE file" +
                    (file_size < 12 ? " (" + std::to_string(file_size) + " bytes)" : ""));
  WavHeader header;
  int block_align = 0;
  int64_t position = 12;
  std::array<unsigned char, 8> chunk{};
  while (in.read(reinterpret_cast<char*>(chunk.data()), chunk.size())) {
    const std::string id(chunk.begin(), chunk.begin() + 4);
    const int64_t size = little_endian_32(chunk.data() + 4);
    position += 8;
    if (id == "fmt ") {
      std::array<unsigned char, 16> format{};
      if (size < 16 || !in.read(reinterpret_cast<char*>(format.data()), format.size()))
        throw DataError(path.string() + ": its 'fmt ' chunk is cut short");
      header.channels = little_endian_16(format.data() + 2);
      header.sample_rate = static_cast<int>(little_endian_32(format.data() + 4));
      block_align = little_endian_16(format.data() + 12);
      header.bits_per_sample = little_endian_16(format.data() + 14);
      if (header.channels <= 0 || header.sample_rate <= 0 || block_align <= 0)
        throw DataError(path.string() + ": its 'fmt ' chunk gives no channels, rate or frame size");
      in.seekg(size - 16 + (size & 1), std::ios::cur);
    } else if (id == "data") {
      if (block_align == 0)
        throw DataError(path.string() + ": its 'data' chunk comes before a 'fmt ' chunk");
      const int64_t present = std::max<int64_t>(0, std::min(size, file_size - position));
      header.frames = size / block_align;
      header.frames_present = present / block_align;
      return header;
    } else {
      in.seekg(size + (size & 1), std::ios::cur);
    }
    position += size + (size & 1);
  }
  throw DataError(path.string() + ": no 'data' chunk (truncated header?)");
}

}  // namespace nabu
