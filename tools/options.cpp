// The program's option parsing shared by its commands: the common flags, whole
// integers and lists of them checked as typed, --shape.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "common.hpp"
#include "tenfold/error.hpp"

namespace tenfold::cli {

std::string flag_of(const Command& cmd, const std::string& field) {
  if (const auto f = cmd.flags.find(field); f != cmd.flags.end()) return f->second;
  std::string flag = "--" + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  // On the command or the subcommand that ran (attention compress).
  for (const CLI::App* app = cmd.app; app != nullptr;) {
    if (app->get_option_no_throw(flag) != nullptr) return flag;
    const auto ran = app->get_subcommands();
    app = ran.empty() ? nullptr : ran.front();
  }
  return {};
}

void add_out_option(CLI::App& cmd, std::string& out) {
  cmd.add_option("-o,--out", out,
                 "Output folder, written whole: created, or replacing an earlier result")
      ->required();
}

void add_backend_option(CLI::App& cmd, std::string& backend) {
  cmd.add_option("--backend", backend,
                 "Compute backend: cpu, cuda, or reference (plain loops in double, slow; for "
                 "checking results)")
      ->check(CLI::IsMember({"cpu", "cuda", "reference"}))
      ->capture_default_str();
}

void add_common_options(CLI::App& cmd, CommonOptions& o) {
  cmd.add_flag("-q,--quiet", o.quiet, "Print no progress on stderr");
  add_backend_option(cmd, o.backend);
  cmd.add_option("--dtype", o.dtype,
                 "Compute in float32 or float64 (default: the input file's dtype)")
      ->check(CLI::IsMember({"float32", "float64"}));
}

namespace {

// "--rank" of "-r,--rank": the last of the option's names.
std::string long_name(const std::string& names) { return names.substr(names.rfind(',') + 1); }

}  // namespace

template <class I>
I parse_integer(const std::string& flag, const std::string& text) {
  I value{};
  const char* end = text.data() + text.size();
  const auto [ptr, err] = std::from_chars(text.data(), end, value);
  const bool negative = text.size() > 1 && text[0] == '-';
  // A negative number for an unsigned option is out of range too, not malformed.
  const bool unsigned_negative = std::is_unsigned_v<I> && negative &&
                                 text.find_first_not_of("0123456789", 1) == std::string::npos;
  if (err == std::errc::result_out_of_range || unsigned_negative) {
    throw CLI::ValidationError(flag, "'" + text + "' is out of range (at " +
                                         (negative ? "least " : "most ") +
                                         std::to_string(negative ? std::numeric_limits<I>::min()
                                                                 : std::numeric_limits<I>::max()) +
                                         ")");
  }
  if (err != std::errc() || ptr != end) {
    throw CLI::ValidationError(flag, "'" + text + "' is not an integer");
  }
  return value;
}

template <class I>
CLI::Option* add_integer_option(CLI::App& cmd, const std::string& name, I& target,
                                const std::string& description, I least) {
  const std::string flag = long_name(name);
  return cmd
      .add_option_function<std::string>(
          name,
          [&target, flag, least](const std::string& s) {
            target = parse_integer<I>(flag, s);
            if (target < least) {
              throw CLI::ValidationError(
                  flag, "must be at least " + std::to_string(least) + ", got " + s);
            }
          },
          description)
      ->default_str(std::to_string(target));
}

template <class I>
CLI::Option* add_integer_option(CLI::App& cmd, const std::string& name, std::vector<I>& target,
                                const std::string& description, I least) {
  const std::string flag = long_name(name);
  return cmd.add_option_function<std::vector<std::string>>(
      name,
      [&target, flag, least](const std::vector<std::string>& lists) {
        // Split here, not by CLI11's delimiter, which drops empty items ("2,,2").
        target.clear();
        for (const std::string& list : lists) {
          for (std::size_t begin = 0;;) {
            const std::size_t end = list.find(',', begin);
            const std::string item = list.substr(begin, end - begin);
            if (item.empty()) {
              throw CLI::ValidationError(flag, "item " + std::to_string(target.size() + 1) +
                                                   " of '" + list + "' is empty");
            }
            target.push_back(parse_integer<I>(flag, item));
            if (target.back() < least) {
              throw CLI::ValidationError(flag, "item " + std::to_string(target.size()) + " of '" +
                                                   list + "' must be at least " +
                                                   std::to_string(least) + ", got " + item);
            }
            if (end == std::string::npos) break;
            begin = end + 1;
          }
        }
      },
      description);
}

template int parse_integer<int>(const std::string&, const std::string&);
template index_t parse_integer<index_t>(const std::string&, const std::string&);
template std::uint64_t parse_integer<std::uint64_t>(const std::string&, const std::string&);
template CLI::Option* add_integer_option<int>(CLI::App&, const std::string&, int&,
                                              const std::string&, int);
template CLI::Option* add_integer_option<index_t>(CLI::App&, const std::string&, index_t&,
                                                  const std::string&, index_t);
template CLI::Option* add_integer_option<std::uint64_t>(CLI::App&, const std::string&,
                                                        std::uint64_t&, const std::string&,
                                                        std::uint64_t);
template CLI::Option* add_integer_option<index_t>(CLI::App&, const std::string&,
                                                  std::vector<index_t>&, const std::string&,
                                                  index_t);

void add_shape_option(CLI::App& cmd, std::vector<index_t>& shape) {
  add_integer_option(cmd, "--shape", shape,
                     "Shape of a sparse input, comma-separated (default: declared by the file, "
                     "else the largest index of each column)",
                     index_t{1});
}

void require_no_shape(const std::vector<index_t>& shape) {
  if (!shape.empty()) {
    throw CLI::ValidationError(
        "--shape applies to sparse inputs (.tns, .tns.gz, .tfsparse); a .npy file holds its "
        "own shape");
  }
}

}  // namespace tenfold::cli
