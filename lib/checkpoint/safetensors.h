// safetensors files (https://github.com/huggingface/safetensors, "Format"):
//   8 bytes   N, little-endian uint64: the header length
//   N bytes   UTF-8 JSON object, padded with spaces so 8 + N is a multiple of 8:
//             {"__metadata__": {string: string, ...},
//              "<tensor name>": {"dtype": "BF16", "shape": [d0, d1, ...],
//                                "data_offsets": [begin, end]}, ...}
//   rest      the byte buffer; offsets are relative to its start, tensors are
//             row-major little-endian, and together they cover the buffer
//             exactly (no gaps, no overlap).
// Files are written atomically (PATH.tmp, fsync, rename, fsync of the directory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "lib/util/regular_file.h"

namespace srkit {

// Bytes per element of a safetensors dtype ("F32", "BF16", "U16", ...); throws
// std::invalid_argument for an unknown name.
size_t safetensors_dtype_size(const std::string& dtype);

// "[d0, d1, ...]", for messages.
std::string shape_string(const std::vector<int64_t>& shape);

struct TensorRef {
  std::string name;
  std::string
      dtype;  // "F64","F32","F16","BF16","I64","I32","I16","I8","U64","U32","U16","U8","BOOL",...
  std::vector<int64_t> shape;  // [] is a scalar
  const void* data;
  size_t nbytes;  // must equal dtype size * product(shape)
};

// Tensors are laid out in the given order. Names must be unique, non-empty and
// not "__metadata__". Throws (naming the file or tensor) on bad input or I/O
// failure, in which case an existing PATH is left as it was.
void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                      const std::map<std::string, std::string>& metadata);

class SafetensorsReader {
 public:
  // Opens path (a regular file only: lib/util/regular_file.h) and reads and
  // validates the header: 8-byte length within the file, JSON object with no
  // key given twice in one object (so no tensor name twice), metadata string ->
  // string, known dtypes, non-negative shapes, offsets in range with end -
  // begin = dtype size * elements, and tensors covering the data buffer with no
  // gap or overlap. Errors are one line naming the file. The file stays open,
  // so read() takes its bytes from the file whose header was checked even if
  // the path is replaced meanwhile.
  explicit SafetensorsReader(const std::string& path);

  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }

  struct Info {
    std::string dtype;
    std::vector<int64_t> shape;
    size_t nbytes;
  };
  // Throws naming the file and tensor if absent.
  Info info(const std::string& name) const;
  // Copies the tensor's bytes into dst; nbytes must equal info(name).nbytes.
  void read(const std::string& name, void* dst, size_t nbytes) const;
  // Reads a float tensor (F32, F16 or BF16) of `elements` elements into dst as
  // `dtype`, converted by lib/checkpoint/float_tensors.h (exact widening, RN
  // narrowing). Throws naming the file and tensor for another dtype or count.
  void read_as(const std::string& name, DType dtype, void* dst, size_t elements) const;
  // Tensor names in file (offset) order.
  std::vector<std::string> names() const;

  const std::string& path() const { return path_; }

 private:
  struct Entry {
    Info info;
    uint64_t begin;  // offset in the data buffer
  };
  const Entry& entry(const std::string& name) const;

  std::string path_;
  RegularFile file_;
  uint64_t data_start_ = 0;  // file offset of the data buffer: 8 + N
  std::map<std::string, std::string> metadata_;
  std::map<std::string, Entry> tensors_;
};

}  // namespace srkit
