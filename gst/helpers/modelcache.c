/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The process-wide model cache (see modelcache.h). */

#include "modelcache.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

typedef struct
{
  gchar *key;
  vd_model *model;
  guint users;
} CacheEntry;

static GMutex cache_lock;
static GPtrArray *cache_entries;        /* CacheEntry *, a handful at most */

/* The identity of the file @path names now, or NULL when it cannot be read. */
static gchar *
file_key (const gchar * path, GError ** error)
{
  struct stat st;

  if (stat (path, &st) != 0) {
    int err = errno;

    g_set_error (error, VD_ERROR, VD_ERROR_FILE, "%s: %s", path,
        g_strerror (err));
    return NULL;
  }
  /* the change time too: a rewrite that keeps the size and restores the
   * modification time (cp -p, touch -r) still changes it */
  return g_strdup_printf ("%ju:%ju:%jd:%jd.%09ld:%jd.%09ld",
      (uintmax_t) st.st_dev, (uintmax_t) st.st_ino, (intmax_t) st.st_size,
      (intmax_t) st.st_mtim.tv_sec, (long) st.st_mtim.tv_nsec,
      (intmax_t) st.st_ctim.tv_sec, (long) st.st_ctim.tv_nsec);
}

static CacheEntry *
find_by_key (const gchar * key)
{
  for (guint i = 0; cache_entries != NULL && i < cache_entries->len; i++) {
    CacheEntry *e = g_ptr_array_index (cache_entries, i);

    if (strcmp (e->key, key) == 0)
      return e;
  }
  return NULL;
}

vd_model *
gst_vision_model_cache_acquire (const gchar * path, gboolean * shared,
    GError ** error)
{
  gchar *key = file_key (path, error);
  CacheEntry *entry;
  vd_model *model;

  *shared = FALSE;
  if (key == NULL)
    return NULL;

  g_mutex_lock (&cache_lock);
  entry = find_by_key (key);
  if (entry != NULL) {
    entry->users++;
    model = vd_model_ref (entry->model);
    g_mutex_unlock (&cache_lock);
    g_free (key);
    *shared = TRUE;
    return model;
  }
  g_mutex_unlock (&cache_lock);

  /* loading takes a while: not under the lock */
  model = vd_model_load (path, error);
  if (model == NULL) {
    g_free (key);
    return NULL;
  }
  {
    /* replaced while it loaded: what was loaded is not known to be either
     * file, so it is this element's alone */
    gchar *after = file_key (path, NULL);
    gboolean same = after != NULL && strcmp (after, key) == 0;

    g_free (after);
    if (!same) {
      g_free (key);
      return model;
    }
  }

  g_mutex_lock (&cache_lock);
  entry = find_by_key (key);
  if (entry != NULL) {
    /* another element loaded the same file meanwhile: use that one */
    entry->users++;
    vd_model_unref (model);
    model = vd_model_ref (entry->model);
    g_free (key);
    *shared = TRUE;
  } else {
    entry = g_new0 (CacheEntry, 1);
    entry->key = key;
    entry->model = vd_model_ref (model);
    entry->users = 1;
    if (cache_entries == NULL)
      cache_entries = g_ptr_array_new ();
    g_ptr_array_add (cache_entries, entry);
  }
  g_mutex_unlock (&cache_lock);
  return model;
}

void
gst_vision_model_cache_release (vd_model * model)
{
  vd_model *last = NULL;

  if (model == NULL)
    return;
  g_mutex_lock (&cache_lock);
  for (guint i = 0; cache_entries != NULL && i < cache_entries->len; i++) {
    CacheEntry *e = g_ptr_array_index (cache_entries, i);

    if (e->model == model && --e->users == 0) {
      last = e->model;
      g_free (e->key);
      g_free (e);
      g_ptr_array_remove_index_fast (cache_entries, i);
      if (cache_entries->len == 0)
        g_clear_pointer (&cache_entries, g_ptr_array_unref);
      break;
    }
    if (e->model == model)
      break;
  }
  g_mutex_unlock (&cache_lock);
  if (last != NULL)
    vd_model_unref (last);
  vd_model_unref (model);
}
