#include "engine/core/npz_writer.h"

#include <array>
#include <fstream>

#include "engine/core/error.h"

namespace sparkglm {

namespace {

uint32_t crc32(const std::string& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

std::string npy_bytes(const NpzArray& a) {
  std::string shape = "(";
  int64_t n = 1;
  for (auto d : a.shape) {
    shape += std::to_string(d) + ",";
    n *= d;
  }
  if (a.shape.size() > 1) shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to 64 bytes, ends in
  // \n.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(a.data), size_t(n) * sizeof(float));
  return out;
}

void put16(std::string& s, uint32_t v) {
  s += char(v & 0xff);
  s += char((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

}  // namespace

void write_npz(const std::string& path, const std::vector<NpzArray>& arrays) {
  std::string zip, central;
  for (const NpzArray& a : arrays) {
    const std::string name = a.name + ".npy";
    const std::string data = npy_bytes(a);
    if (data.size() >= 0xffffffffu)
      throw Error(ErrorKind::kUnsupported, "npz: array too large: " + a.name);
    const uint32_t crc = crc32(data), offset = uint32_t(zip.size());
    std::string local;
    put32(local, 0x04034b50);  // local file header
    put16(local, 20);          // version needed
    put16(local, 0);           // flags
    put16(local, 0);           // method: stored
    put16(local, 0);           // time
    put16(local, 0x21);        // date (1980-01-01)
    put32(local, crc);
    put32(local, uint32_t(data.size()));
    put32(local, uint32_t(data.size()));
    put16(local, uint32_t(name.size()));
    put16(local, 0);
    zip += local + name + data;
    put32(central, 0x02014b50);  // central directory entry
    put16(central, 20);
    put16(central, 20);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, crc);
    put32(central, uint32_t(data.size()));
    put32(central, uint32_t(data.size()));
    put16(central, uint32_t(name.size()));
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, offset);
    central += name;
  }
  const uint32_t central_offset = uint32_t(zip.size());
  zip += central;
  put32(zip, 0x06054b50);  // end of central directory
  put16(zip, 0);
  put16(zip, 0);
  put16(zip, uint32_t(arrays.size()));
  put16(zip, uint32_t(arrays.size()));
  put32(zip, uint32_t(central.size()));
  put32(zip, central_offset);
  put16(zip, 0);
  std::ofstream out(path, std::ios::binary);
  out.write(zip.data(), std::streamsize(zip.size()));
  if (!out) throw Error(ErrorKind::kIo, "failed writing " + path);
}

}  // namespace sparkglm
