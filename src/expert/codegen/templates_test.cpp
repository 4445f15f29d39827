// The embedded Mustache templates: every file under templates/ is built in, values go in verbatim (Python
// source is never HTML-escaped), sections follow their flags, and a missing template is a ConfigError.
#include "expert/codegen/templates.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"

namespace egg::expert::templates {
namespace {

TEST(TemplatesTest, EveryFileUnderTemplatesIsEmbedded) {
  size_t on_disk = 0;
  const std::filesystem::path root = std::filesystem::path(EGG_SOURCE_DIR) / "templates";
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.is_regular_file() && entry.path().extension() == ".mustache") {
      ++on_disk;
      const std::string name = std::filesystem::relative(entry.path(), root).generic_string();
      EXPECT_EQ(EmbeddedFiles().count(name), 1U) << name;
    }
  }
  EXPECT_GT(on_disk, 0U);
  EXPECT_EQ(EmbeddedFiles().size(), on_disk);
}

TEST(TemplatesTest, ValuesGoInVerbatimAndSectionsFollowTheirFlags) {
  Values values;
  values.text = {
      {"name", "egg_k0_conv_nhwc"},
      {"params", "ptr0, ptr1, "},
      {"what", "channels-last repack"},
      {"rows", "4096"},
      {"columns", "64"},
      {"summary", "relu(x) < 1 & y > 0"},
      {"body", "    tmp0 = tl.load(ptr0 + pindex, mask)\n    tl.store(ptr1 + pindex, tmp0, mask)"}};
  values.flags = {{"int64", false}};
  const std::string narrow = Render("triton/repack.py.mustache", values);
  EXPECT_NE(narrow.find("def egg_k0_conv_nhwc(ptr0, ptr1, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):"),
            std::string::npos)
      << narrow;
  EXPECT_NE(narrow.find("relu(x) < 1 & y > 0"), std::string::npos) << "no HTML escaping";
  EXPECT_NE(narrow.find("pmask = pindex < 4096"), std::string::npos);
  EXPECT_NE(narrow.find("    tl.store(ptr1 + pindex, tmp0, mask)"), std::string::npos);
  EXPECT_EQ(narrow.find(".to(tl.int64)"), std::string::npos);
  values.flags["int64"] = true;
  const std::string wide = Render("triton/repack.py.mustache", values);
  EXPECT_NE(wide.find("tl.program_id(0).to(tl.int64) * BLOCK_P"), std::string::npos) << wide;
}

TEST(TemplatesTest, AMissingTemplateIsAConfigError) {
  try {
    Render("triton/nothing.py.mustache", {});
    ADD_FAILURE() << "no error";
  } catch (const EggError& error) {
    EXPECT_EQ(error.Kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(error.what()).find("triton/nothing.py.mustache"), std::string::npos);
  }
}

}  // namespace
}  // namespace egg::expert::templates
