// Exception hierarchy of Tenfold. Every error thrown by the library derives from
// tenfold::Error (itself a std::runtime_error); messages name the offending value.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "tenfold/export.hpp"

namespace tenfold {

/// Base class of every exception the library throws.
class TENFOLD_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An argument is out of its valid range (rank 0, NaN entry, bad option...).
class TENFOLD_API InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A field of an options struct (CpOptions, TuckerOptions, attention::CompressOptions)
/// is out of its range. option() is the field's C++ name ("max_iters"), problem() the
/// rest of the message ("must be at least 1, got 0"); what() joins them with a space.
/// A front end names the option as its user spelt it (the program: "--max-iters must
/// be at least 1, got 0").
class TENFOLD_API InvalidOption : public InvalidArgument {
 public:
  InvalidOption(const std::string& option, const std::string& problem)
      : InvalidArgument(option + " " + problem), option_size_(option.size()) {}
  std::string option() const { return std::string(what(), option_size_); }
  std::string problem() const { return std::string(what() + option_size_ + 1); }

 private:
  std::size_t option_size_;  // what() is option, a space, problem
};

/// Shapes of two arguments do not agree (factor rows vs. tensor mode size...).
class TENFOLD_API DimensionMismatch : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

/// A numerical step failed (non-finite result, eigensolver did not converge...).
class TENFOLD_API NumericalError : public Error {
 public:
  using Error::Error;
};

/// The requested feature (e.g. the CUDA backend) was not compiled into this build.
class TENFOLD_API NotCompiled : public Error {
 public:
  using Error::Error;
};

/// A GPU runtime or library call failed, or no usable device is present.
class TENFOLD_API DeviceError : public Error {
 public:
  using Error::Error;
};

/// A request needs more memory than the backend has available (host memory, or the
/// device's for cuda). Raised before allocating, with the estimate and the amount
/// available in the message.
class TENFOLD_API MemoryError : public Error {
 public:
  using Error::Error;
};

/// A progress callback returned false at a point where the call had no complete result
/// to return (ST-HOSVD or HOSVD before its last mode, a checkpoint before it was
/// written): the call stopped, and nothing was returned or written.
class TENFOLD_API Cancelled : public Error {
 public:
  using Error::Error;
};

/// Reading or writing a file failed, or a file is malformed.
class TENFOLD_API IoError : public Error {
 public:
  using Error::Error;
};

}  // namespace tenfold
