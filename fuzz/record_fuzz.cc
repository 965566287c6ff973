// Fuzz target: ownership records (store/record.h) as read back from disk.
//
// Input: the bytes of one record file. Properties: DecodeRecord never
// crashes; a record that decodes and validates re-encodes to text that
// decodes to the same record (so a restart never changes what migd owns),
// and its key always names a safe file (no '/', no "..").
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "store/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using migd::store::Record;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  migd::StatusOr<Record> decoded = migd::store::DecodeRecord(text, "fuzz.json");
  if (!decoded.ok()) return 0;
  if (!migd::store::ValidateRecord(*decoded).ok()) return 0;

  const std::string encoded = migd::store::EncodeRecord(*decoded);
  migd::StatusOr<Record> again = migd::store::DecodeRecord(encoded, "fuzz.json");
  FUZZ_CHECK(again.ok(), "an encoded valid record does not decode");
  FUZZ_CHECK(*again == *decoded, "record changed across encode/decode");
  FUZZ_CHECK(migd::store::EncodeRecord(*again) == encoded, "encoding is not stable");

  migd::StatusOr<std::string> name = migd::store::RecordFileName(decoded->key);
  FUZZ_CHECK(name.ok(), "a valid record has no file name");
  FUZZ_CHECK(name->find('/') == std::string::npos && name->find("..") == std::string::npos,
             "record file name escapes the state dir");
  return 0;
}
