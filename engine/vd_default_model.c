/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where the bundled default model is: the environment, then folders found from
 * the library's own location (a build tree's copy, or the models folder of the
 * installed prefix wherever that prefix was moved), then the data folder the
 * build was configured with. */

#define _GNU_SOURCE /* dladdr */
#include "vd_config.h"

#include <visiondetect/vd.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The folder of the file (shared library or program) this code was loaded
 * from, symbolic links resolved; NULL when the loader cannot say. */
static char *library_dir(void)
{
    Dl_info info;
    char *real, *dir;

    if (dladdr((const void *)vd_default_model_path, &info) == 0 || info.dli_fname == NULL)
        return NULL;
    real = realpath(info.dli_fname, NULL);
    if (real == NULL)
        return NULL;
    dir = g_path_get_dirname(real);
    free(real);
    return dir;
}

/* Whether @dir is the folder the build tree made the library in. */
static gboolean is_build_dir(const char *dir)
{
    char *build = realpath(VD_ENGINE_BUILDDIR, NULL);
    gboolean same = build != NULL && strcmp(build, dir) == 0;

    free(build);
    return same;
}

/* The folders to look in, in order, without repeats (free with g_ptr_array_unref). */
static GPtrArray *model_dirs(void)
{
    GPtrArray *dirs = g_ptr_array_new_with_free_func(g_free);
    char *lib = library_dir();
    const char *configured = VD_MODELDIR;

    if (lib != NULL) {
        /* uninstalled: the copy the build places beside its library's folder */
        if (is_build_dir(lib))
            g_ptr_array_add(dirs, g_canonicalize_filename(VD_BUILD_MODELDIR_FROM_LIBDIR, lib));
        /* installed: <prefix>/<datadir>/visiondetect/models seen from <prefix>/<libdir> */
        else if (*VD_MODELDIR_FROM_LIBDIR != '\0')
            g_ptr_array_add(dirs, g_canonicalize_filename(VD_MODELDIR_FROM_LIBDIR, lib));
        g_free(lib);
    }
    if (dirs->len == 0 || strcmp(g_ptr_array_index(dirs, 0), configured) != 0)
        g_ptr_array_add(dirs, g_strdup(configured));
    return dirs;
}

char *vd_default_model_path(char **searched)
{
    const char *env = g_getenv("VISIONDETECT_MODEL");
    GString *where;
    GPtrArray *dirs;
    char *found = NULL;

    if (searched != NULL)
        *searched = NULL;
    if (env != NULL && *env != '\0')
        return g_strdup(env);
    where = g_string_new("$VISIONDETECT_MODEL (unset)");
    dirs = model_dirs();
    for (guint i = 0; i < dirs->len && found == NULL; i++) {
        char *path = g_build_filename(g_ptr_array_index(dirs, i), VD_DEFAULT_MODEL_NAME, NULL);

        if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
            found = path;
        else {
            g_string_append_printf(where, ", %s", (const char *)g_ptr_array_index(dirs, i));
            g_free(path);
        }
    }
    g_ptr_array_unref(dirs);
    if (found == NULL && searched != NULL)
        *searched = g_string_free(where, FALSE);
    else
        g_string_free(where, TRUE);
    return found;
}
