// Every typed enum's name table: each value listed once with a distinct name, names round-trip, an unknown
// name is refused (the tables live beside their enums: design/design_record.h, patterns/*.h).
#include "expert/ir/name_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "expert/design/design_record.h"
#include "expert/patterns/pool.h"
#include "expert/patterns/recurrent.h"
#include "expert/patterns/reduction.h"
#include "expert/patterns/scan.h"

namespace egg::expert {
namespace {

template <typename Enum>
class NameTableTest : public ::testing::Test {};

using Enums = ::testing::Types<Algorithm, Precision, ReductionKind, PoolKind, ScanKind, RecurrentCell>;
TYPED_TEST_SUITE(NameTableTest, Enums);

TYPED_TEST(NameTableTest, EveryValueOnceWithADistinctNameThatRoundTrips) {
  const auto& table = EnumNames<TypeParam>::kTable;
  std::set<int> values;
  std::set<std::string_view> names;
  for (const auto& [value, name] : table) {
    values.insert(static_cast<int>(value));
    names.insert(name);
    EXPECT_EQ(NameOf(value), name);
    ASSERT_TRUE(FromName<TypeParam>(name).has_value()) << name;
    EXPECT_EQ(*FromName<TypeParam>(name), value) << name;
    EXPECT_EQ(ParseName<TypeParam>(name, "value"), value) << name;
  }
  EXPECT_EQ(names.size(), table.size()) << "names are distinct";
  // The enumerators are 0..N-1 (no explicit values), so N distinct values in [0, N) are all of them.
  EXPECT_EQ(values.size(), table.size());
  EXPECT_EQ(*values.begin(), 0);
  EXPECT_EQ(*values.rbegin(), static_cast<int>(table.size()) - 1);
}

TYPED_TEST(NameTableTest, AnUnknownNameIsRefused) {
  EXPECT_FALSE(FromName<TypeParam>("no-such-name").has_value());
  EXPECT_FALSE(FromName<TypeParam>("TILED").has_value()) << "names are exact";
  EXPECT_THROW(ParseName<TypeParam>("no-such-name", "thing"), UnknownName);
}

TEST(NameTableTest, TheRefusalNamesWhatItKnows) {
  try {
    ParseName<Precision>("fp16", "precision");
    FAIL() << "fp16 parsed";
  } catch (const UnknownName& error) {
    EXPECT_STREQ(error.what(), "unknown precision 'fp16' (one of ieee, tf32, tf32x3)");
  }
}

TEST(NameTableTest, UnsetIsTheEmptyNameOfTheRecord) {
  EXPECT_EQ(NameOf(Algorithm::kUnset), "");
  EXPECT_EQ(NameOf(Precision::kUnset), "");
  EXPECT_EQ(FromName<Algorithm>(""), Algorithm::kUnset);
  EXPECT_EQ(DotPrecision(Precision::kUnset), Precision::kIeee);
  EXPECT_EQ(DotPrecision(Precision::kTf32), Precision::kTf32);
}

}  // namespace
}  // namespace egg::expert
