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
  values.text = {{"task", "level1/t.py"},
                 {"summary", "relu(x) < 1 & y > 0"},
                 {"kernels", "@triton.jit\ndef egg_k0_relu(ptr0, ptr1, XBLOCK: tl.constexpr):\n    pass"},
                 {"guard_args", "x"}};
  values.flags = {{"settings", false}, {"cuda_graph", false}};
  const std::string plain = Render("triton/model.py.mustache", values);
  EXPECT_NE(plain.find("from level1/t.py."), std::string::npos) << plain;
  EXPECT_NE(plain.find("# relu(x) < 1 & y > 0\n"), std::string::npos) << "no HTML escaping";
  EXPECT_NE(plain.find("def egg_k0_relu(ptr0, ptr1, XBLOCK: tl.constexpr):\n    pass"), std::string::npos);
  EXPECT_EQ(plain.find("def _egg_settings_hold(self):"), std::string::npos);
  EXPECT_EQ(plain.find("_egg_graphed(self, self._egg_forward, (x,))"), std::string::npos);
  values.flags = {{"settings", true}, {"cuda_graph", true}};
  const std::string both = Render("triton/model.py.mustache", values);
  EXPECT_NE(both.find("def _egg_settings_hold(self):"), std::string::npos) << both;
  EXPECT_NE(both.find("return _egg_graphed(self, self._egg_forward, (x,))"), std::string::npos) << both;
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
