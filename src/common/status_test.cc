#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

namespace tarn {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(OkStatus(), s);
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = InvalidArgumentError("bad value");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad value");
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: bad value");
}

TEST(StatusTest, HelperConstructorsUseTheirCodes) {
  EXPECT_EQ(NotFoundError("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(AlreadyExistsError("x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(FailedPreconditionError("x").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(UnimplementedError("x").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(InternalError("x").code(), StatusCode::kInternal);
  EXPECT_EQ(UnavailableError("x").code(), StatusCode::kUnavailable);
  EXPECT_EQ(PermissionDeniedError("x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ResourceExhaustedError("x").code(), StatusCode::kResourceExhausted);
}

TEST(StatusTest, CodeNamesFollowGrpc) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kCancelled), "CANCELLED");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnknown), "UNKNOWN");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeName(StatusCode::kNotFound), "NOT_FOUND");
  EXPECT_EQ(StatusCodeName(StatusCode::kAlreadyExists), "ALREADY_EXISTS");
  EXPECT_EQ(StatusCodeName(StatusCode::kPermissionDenied), "PERMISSION_DENIED");
  EXPECT_EQ(StatusCodeName(StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(StatusCode::kAborted), "ABORTED");
  EXPECT_EQ(StatusCodeName(StatusCode::kOutOfRange), "OUT_OF_RANGE");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnimplemented), "UNIMPLEMENTED");
  EXPECT_EQ(StatusCodeName(StatusCode::kInternal), "INTERNAL");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(StatusCode::kDataLoss), "DATA_LOSS");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnauthenticated), "UNAUTHENTICATED");
  // Numeric values match the gRPC codes.
  EXPECT_EQ(static_cast<int>(StatusCode::kNotFound), 5);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnauthenticated), 16);
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(NotFoundError("a"), NotFoundError("a"));
  EXPECT_FALSE(NotFoundError("a") == NotFoundError("b"));
  EXPECT_FALSE(NotFoundError("a") == InternalError("a"));
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status s = NotFoundError("no such file").WithContext("reading /etc/x");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "reading /etc/x: no such file");
  Status twice = s.WithContext("loading");
  EXPECT_EQ(twice.message(), "loading: reading /etc/x: no such file");
}

TEST(StatusTest, WithContextOnOkStaysOk) {
  Status s = OkStatus().WithContext("anything");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusOrTest, HoldsValue) {
  StatusOr<int> v = 42;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value(), 42);
  EXPECT_EQ(*v, 42);
  EXPECT_TRUE(v.status().ok());
}

TEST(StatusOrTest, HoldsError) {
  StatusOr<int> v = InternalError("boom");
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
  EXPECT_EQ(v.status().message(), "boom");
}

TEST(StatusOrTest, ArrowAndMutation) {
  StatusOr<std::string> v = std::string("abc");
  EXPECT_EQ(v->size(), 3u);
  v->push_back('d');
  EXPECT_EQ(*v, "abcd");
  v.value() += "e";
  EXPECT_EQ(v.value(), "abcde");
}

TEST(StatusOrTest, MoveOnlyValueCanBeMovedOut) {
  StatusOr<std::unique_ptr<int>> v = std::make_unique<int>(7);
  ASSERT_TRUE(v.ok());
  std::unique_ptr<int> p = std::move(v).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 7);
}

TEST(StatusOrDeathTest, ValueOfErrorAborts) {
  StatusOr<int> v = NotFoundError("gone");
  EXPECT_DEATH({ (void)v.value(); }, "gone");
}

TEST(StatusOrDeathTest, ConstructingFromOkStatusAborts) {
  EXPECT_DEATH(
      {
        StatusOr<int> v{OkStatus()};
        (void)v;
      },
      "OK Status");
}

// Helpers for the macros.
Status FailIf(bool fail) { return fail ? FailedPreconditionError("failed") : OkStatus(); }

Status UseReturnIfError(bool fail, int* reached) {
  RETURN_IF_ERROR(FailIf(fail));
  ++*reached;
  return OkStatus();
}

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));  // two in one function: distinct temporaries
  return q;
}

Status QuarterInto(int x, int* out) {
  ASSIGN_OR_RETURN(*out, Quarter(x));
  return OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorPassesOk) {
  int reached = 0;
  EXPECT_TRUE(UseReturnIfError(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsError) {
  int reached = 0;
  Status s = UseReturnIfError(true, &reached);
  EXPECT_EQ(s, FailedPreconditionError("failed"));
  EXPECT_EQ(reached, 0);
}

TEST(StatusMacrosTest, AssignOrReturn) {
  StatusOr<int> ok = Quarter(12);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);

  StatusOr<int> first = Quarter(7);
  EXPECT_EQ(first.status(), InvalidArgumentError("odd: 7"));

  StatusOr<int> second = Quarter(6);  // 6 / 2 = 3, then 3 is odd
  EXPECT_EQ(second.status(), InvalidArgumentError("odd: 3"));
}

TEST(StatusMacrosTest, AssignOrReturnToExistingLvalue) {
  int out = -1;
  EXPECT_TRUE(QuarterInto(8, &out).ok());
  EXPECT_EQ(out, 2);
  out = -1;
  EXPECT_EQ(QuarterInto(5, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, -1);
}

}  // namespace
}  // namespace tarn

namespace tarn {
namespace {

TEST(StatusOrValueOr, ValueOrFallback) {
  StatusOr<std::string> good(std::string("x"));
  StatusOr<std::string> bad(NotFoundError("no"));
  EXPECT_EQ(good.value_or("y"), "x");
  EXPECT_EQ(bad.value_or("y"), "y");
}

}  // namespace
}  // namespace tarn
