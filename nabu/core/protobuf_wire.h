// The protocol-buffer wire format, for the few messages Nabu writes by hand (TensorBoard events,
// core/tensorboard.cpp; ONNX models, core/onnx.cpp): varints, fixed-width little-endian numbers
// and length-delimited fields, appended to a string field by field.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace nabu::wire {

inline void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

inline void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

template <class T>
void put_little_endian(std::string& out, T value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86 and ARM Linux are little-endian
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

inline void put_double(std::string& out, int field, double value) {
  put_key(out, field, 1);  // 64-bit
  put_little_endian(out, value);
}

inline void put_float(std::string& out, int field, float value) {
  put_key(out, field, 5);  // 32-bit
  put_little_endian(out, value);
}

inline void put_int64(std::string& out, int field, int64_t value) {
  put_key(out, field, 0);  // varint; a negative int64 takes ten bytes, as protobuf's
  put_varint(out, static_cast<uint64_t>(value));
}

inline void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);  // length-delimited
  put_varint(out, bytes.size());
  out += bytes;
}

inline void put_packed_doubles(std::string& out, int field, const std::vector<double>& values) {
  std::string packed;
  for (double v : values) put_little_endian(packed, v);
  put_bytes(out, field, packed);
}

}  // namespace nabu::wire
