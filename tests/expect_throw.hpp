// expect_throw_with: the check that a call throws a given error with a given message.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace tenfold::test {

/// Runs `f` and checks that it throws E with a message containing `needle`.
template <class E, class F>
void expect_throw_with(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' does not contain '" << needle << "'";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type, message '" << e.what() << "'";
  }
}

}  // namespace tenfold::test
