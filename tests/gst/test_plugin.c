/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The plugin: four elements, each with metadata and a description of every
 * property of its own (what gst-inspect-1.0 shows). */
#include "vdtest.h"

#include <string.h>

GST_START_TEST (test_elements_documented)
{
  const gchar *names[] = { "visiondetect", "visiontrack", "visionoverlay",
    "visionjson"
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (names); i++) {
    GstElementFactory *factory = gst_element_factory_find (names[i]);
    GstElement *element;
    GParamSpec **props;
    guint n, p, own = 0;

    fail_unless (factory != NULL, "no element %s", names[i]);
    fail_unless (strlen (gst_element_factory_get_metadata (factory,
                GST_ELEMENT_METADATA_DESCRIPTION)) > 30);
    fail_unless (gst_element_factory_get_num_pad_templates (factory) == 2);
    element = gst_element_factory_create (factory, NULL);
    props = g_object_class_list_properties (G_OBJECT_GET_CLASS (element), &n);
    for (p = 0; p < n; p++) {
      if (props[p]->owner_type != G_OBJECT_TYPE (element))
        continue;
      own++;
      fail_unless (strlen (g_param_spec_get_blurb (props[p])) >= 20,
          "%s::%s has no useful description", names[i], props[p]->name);
    }
    fail_unless (own >= 2, "%s has %u properties", names[i], own);
    g_free (props);
    gst_object_unref (element);
    gst_object_unref (factory);
  }
}

GST_END_TEST;

static Suite *
plugin_suite (void)
{
  Suite *s = suite_create ("plugin");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_elements_documented);
  return s;
}

GST_CHECK_MAIN (plugin);
