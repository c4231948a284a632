// Runs a libFuzzer-style target (LLVMFuzzerTestOneInput) without libFuzzer, which GCC lacks:
// every file of a seed corpus, then pseudo-random mutations of them from a fixed seed, until
// a number of runs or a time limit is reached. Deterministic for a given seed, so a failure
// found in CI reproduces; built with the sanitizers of the build it is part of.
//   fuzz_driver <corpus-dir> [runs] [seconds] [seed]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using bytes = std::vector<std::uint8_t>;

// Fragments that matter to the parsers under test, spliced into inputs.
const std::vector<std::string> dictionary = {"password=",
                                             "password",
                                             "'",
                                             "\\",
                                             "\\'",
                                             "%",
                                             "%40",
                                             "postgresql://",
                                             "u:",
                                             "@",
                                             "?",
                                             "&password=",
                                             " ",
                                             "=",
                                             "\x01",
                                             "\x02",
                                             std::string(1, '\0'),
                                             "NaN",
                                             "-Infinity",
                                             "inf",
                                             "9223372036854775807",
                                             "-9223372036854775808",
                                             "18446744073709551616",
                                             "1e400",
                                             "t",
                                             "false",
                                             "\"",
                                             "{",
                                             "}",
                                             ",",
                                             "NULL",
                                             "\xc3\x28",
                                             "\xff",
                                             std::string(64, 'a'),
                                             "*"};

bytes read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), {});
}

void mutate(bytes& b, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 6) {
      case 0:  // flip a bit (never the area selector: keep exploring the seed's area)
        if (b.size() > 1) b[1 + pick(b.size() - 1)] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // insert a random byte
        b.insert(b.begin() + static_cast<long>(1 + pick(b.size())),
                 static_cast<std::uint8_t>(rng()));
        break;
      case 2:  // erase a range
        if (b.size() > 1) {
          auto at = 1 + pick(b.size() - 1);
          auto n = 1 + pick(std::min<std::size_t>(16, b.size() - at));
          b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
        }
        break;
      case 3: {  // splice in a dictionary word
        const auto& w = dictionary[pick(dictionary.size())];
        b.insert(b.begin() + static_cast<long>(std::min(b.size(), 1 + pick(b.size()))), w.begin(),
                 w.end());
        break;
      }
      case 4:  // duplicate a chunk (grows inputs)
        if (b.size() > 1) {
          auto at = 1 + pick(b.size() - 1);
          auto n = 1 + pick(std::min<std::size_t>(256, b.size() - at));
          bytes chunk(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
          b.insert(b.begin() + static_cast<long>(at), chunk.begin(), chunk.end());
        }
        break;
      case 5:  // overwrite a byte with an interesting value
        if (b.size() > 1) {
          static const std::uint8_t values[] = {0,    1,   2,    0x7f, 0x80, 0xff,
                                                '\'', '"', '\\', '=',  ' '};
          b[1 + pick(b.size() - 1)] = values[pick(sizeof values)];
        }
        break;
    }
  }
  if (b.size() > 1 << 16) b.resize(1 << 16);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir> [runs] [seconds] [seed]\n", argv[0]);
    return 2;
  }
  const long runs = argc > 2 ? std::atol(argv[2]) : 100000;
  const auto limit = std::chrono::seconds(argc > 3 ? std::atol(argv[3]) : 15);
  std::mt19937_64 rng(argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 20261129);

  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());  // directory order is not deterministic
  std::vector<bytes> seeds;
  for (const auto& f : files) seeds.push_back(read_all(f));
  if (seeds.empty()) {
    std::fprintf(stderr, "no seeds in %s\n", argv[1]);
    return 2;
  }
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());

  const auto start = std::chrono::steady_clock::now();
  long done = 0;
  for (; done < runs && std::chrono::steady_clock::now() - start < limit; ++done) {
    bytes b = seeds[rng() % seeds.size()];
    mutate(b, rng);
    LLVMFuzzerTestOneInput(b.data(), b.size());
  }
  std::printf("%zu seeds and %ld mutated inputs ran clean\n", seeds.size(), done);
  return 0;
}
