/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer harness of visionjson's JSON values (gst/helpers/jsonformat.c, the
 * code the element runs): a label of any bytes (other elements set the labels
 * visionjson writes) and a double of any bits with 0..9 decimals go into one
 * JSON object, which json-glib must parse back: the label equal to the input
 * (with U+FFFD for invalid UTF-8), the number null when not finite and within
 * half a unit of its last decimal otherwise. */
#include "../../gst/helpers/jsonformat.h"

#include <json-glib/json-glib.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9)
        return 0;
    double value;
    memcpy(&value, data, 8);
    int decimals = data[8] % 10;
    char *label = g_strndup((const char *)data + 9, size - 9); /* ends at a NUL, like a C string */

    GString *json = g_string_new("{\"label\":");
    gst_vision_json_append_string(json, label);
    g_string_append(json, ",\"value\":");
    gst_vision_json_append_number(json, value, decimals);
    g_string_append(json, "}");

    if (!g_utf8_validate(json->str, (gssize)json->len, NULL))
        abort(); /* a JSON line is UTF-8 */
    JsonParser *parser = json_parser_new();
    if (!json_parser_load_from_data(parser, json->str, (gssize)json->len, NULL))
        abort();
    JsonObject *object = json_node_get_object(json_parser_get_root(parser));
    char *expected = g_utf8_make_valid(label, -1);
    if (strcmp(json_object_get_string_member(object, "label"), expected) != 0)
        abort();
    JsonNode *number = json_object_get_member(object, "value");
    if (!isfinite(value)) {
        if (!JSON_NODE_HOLDS_NULL(number))
            abort();
    } else {
        double parsed = json_node_get_double(number);
        /* printf's rounding to @decimals, then the parse back: half a unit of the
         * last decimal, and a few ulps for the decimal <-> binary conversions */
        double bound = 0.5 * pow(10.0, -decimals) + 4 * fabs(value) * DBL_EPSILON;
        if (!(fabs(parsed - value) <= bound))
            abort();
    }
    g_free(expected);
    g_object_unref(parser);
    g_string_free(json, TRUE);
    g_free(label);
    return 0;
}
