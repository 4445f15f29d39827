#include "expert/codegen/size_form.h"

#include <gtest/gtest.h>

namespace egg::expert {
namespace {

TEST(SizeFormTest, ExpressionsWriteHigherDegreesFirstAndBareNamesBare) {
  const std::vector<std::string> names = {"egg_B", "egg_C"};
  EXPECT_EQ(FormExpression({{{1, 0}, 1}}, names), "egg_B");
  EXPECT_EQ(FormExpression({{{1, 0}, 2}}, names), "(egg_B * 2)");
  EXPECT_EQ(FormExpression({{{1, 0}, -1}, {{0, 0}, 4}}, names), "(-egg_B + 4)");
  EXPECT_EQ(FormExpression({{{1, 1}, 32}, {{0, 2}, 1}, {{0, 0}, -1}}, names),
            "(egg_B * egg_C * 32 + egg_C * egg_C - 1)");
  EXPECT_EQ(FormExpression({{{0, 0}, 7}}, names), "(7)");
  EXPECT_EQ(FormAt({{{1, 1}, 32}, {{0, 2}, 1}, {{0, 0}, -1}}, {2, 3}), 2 * 3 * 32 + 9 - 1);
}

TEST(SizeFormTest, AFitNeedsIntegerCoefficientsAndEveryPoint) {
  // one size at 8, 9, 10 (the fit), 11 and 1032 (the checks)
  const std::vector<std::vector<int64_t>> points = {{8}, {9}, {10}, {11}, {1032}};
  size_t off = 0;
  const std::optional<SizeForm> square = FitSizeForm(points, {64, 81, 100, 121, 1032 * 1032}, {8}, &off);
  ASSERT_TRUE(square.has_value());
  EXPECT_EQ(*square, (SizeForm{{{2}, 1}}));
  // B*(B+1)/2 has the coefficients 1/2: no integer polynomial
  EXPECT_FALSE(FitSizeForm(points, {36, 45, 55, 66, 1032 * 1033 / 2}, {8}, &off).has_value());
  // B // 8 is 1 at 8..11 and tells itself apart at 1032 only
  EXPECT_FALSE(FitSizeForm(points, {1, 1, 1, 1, 129}, {8}, &off).has_value());
  EXPECT_EQ(off, 4U) << "the far point is the one it misses";
  // a point of the fit's grid missing: no fit
  EXPECT_FALSE(FitSizeForm({{8}, {9}}, {8, 9}, {8}, &off).has_value());
}

}  // namespace
}  // namespace egg::expert
