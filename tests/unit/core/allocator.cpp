// SPDX-License-Identifier: Apache-2.0
#include <inferwire/core/allocator.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {
// Sets (or unsets) an environment variable for the scope's lifetime.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};
}  // namespace

TEST_CASE("allocator: keep_large_blocks leaves a configured allocator alone", "[core]") {
#if defined(__GLIBC__)
  scoped_env t("GLIBC_TUNABLES", nullptr), m("MALLOC_MMAP_THRESHOLD_", nullptr), r("MALLOC_TRIM_THRESHOLD_", nullptr);
  {
    scoped_env set("GLIBC_TUNABLES", "glibc.malloc.check=0");
    CHECK_FALSE(inferwire::keep_large_blocks());
  }
  {
    scoped_env set("GLIBC_TUNABLES", "glibc.rtld.nns=4");  // not the allocator's
    CHECK(inferwire::keep_large_blocks());
  }
  {
    scoped_env set("MALLOC_MMAP_THRESHOLD_", "1048576");
    CHECK_FALSE(inferwire::keep_large_blocks());
  }
  {
    scoped_env set("MALLOC_TRIM_THRESHOLD_", "1048576");
    CHECK_FALSE(inferwire::keep_large_blocks());
  }
  CHECK(inferwire::keep_large_blocks());
  // Blocks of a few MiB come and go as before.
  for (int i = 0; i < 8; ++i) {
    std::vector<char> block(std::size_t{4} << 20, static_cast<char>(i));
    CHECK(block[block.size() - 1] == static_cast<char>(i));
  }
#else
  CHECK_FALSE(inferwire::keep_large_blocks());
#endif
}
