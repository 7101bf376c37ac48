/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The process-wide shared, batching engines (see batcher.h). */

#include "batcher.h"

#include <string.h>

GST_DEBUG_CATEGORY_STATIC (gst_vision_batcher_debug);
#define GST_CAT_DEFAULT gst_vision_batcher_debug

/* One batch running and the next one copied and queued in the engine: the
 * copy of a batch overlaps the computation of the one before, and frames
 * arriving meanwhile gather into the batch after. */
#define MAX_BATCHES_IN_FLIGHT 2

/* On the CPU a shared engine is several contexts ("lanes"), at most this many,
 * the threads shared out among them: a batch's frames are split among the lanes,
 * which run their parts side by side. The backend runs a batch frame by frame,
 * and a frame of a small model on one thread keeps its core busier than on two
 * threads that meet at every layer (MobileNetV3-Large-320-FPN in bf16 at 640x480
 * on two Zen 4 cores: 8 streams at 42 frames/s on one context of 2 threads, 64
 * on 8 elements of one thread each; tools/bench/CPU.md, "Many cameras on one
 * machine"). Each lane holds its own copy of the model's packed weights. */
#define MAX_CPU_LANES 4

typedef struct _GstVisionBatcher GstVisionBatcher;

typedef enum
{
  REQUEST_QUEUED,
  REQUEST_SUBMITTED,
  REQUEST_DONE,
} RequestState;

/* A frame. Reference counted: its client's and, until it is done, the
 * engine's. Fields under the engine's lock unless said otherwise. */
struct _GstVisionBatchRequest
{
  GstVisionBatcherClient *client;       /* NULL once cancelled */
  /* written by the submitter before queueing, then read by the dispatcher
   * and collector only */
  GstVideoFrame frame;
  gboolean mapped;              /* @frame is mapped (the collector unmaps) */
  vd_image image;
  gfloat score_threshold, nms_threshold;
  gint max_detections;
  gint64 deadline;              /* monotonic µs: its batch runs by then */

  RequestState state;
  gboolean cancelled;
  gboolean alone;               /* it runs by itself (its batch failed, or a
                                 * warm-up) */
  gboolean counted;             /* in the engine's statistics */
  guint scan;                   /* dispatcher: the scan that grouped it */
  vd_result result;
  GError *error;
  GstClockTime batch_time;
  guint batch_frames;
};

struct _GstVisionBatcherClient
{
  GstVisionBatcher *batcher;
  /* under the engine's lock */
  guint batch_size;
  gint64 timeout_us;
  guint max_in_flight;
  guint outstanding;            /* submitted, not done nor cancelled */
  gboolean idle;
};

/* A batch between the dispatcher and the collector: its frames in @n_parts
 * consecutive parts, part i on lane i. */
typedef struct
{
  GPtrArray *requests;          /* GstVisionBatchRequest *, the engine's refs */
  gint64 submitted_at;          /* monotonic µs */
  guint n_parts;                /* parts submitted (to lanes 0 .. n_parts - 1) */
  guint part_first[MAX_CPU_LANES], part_n[MAX_CPU_LANES];
  GError *submit_error;         /* vd_submit () refused a part: the batch failed */
} Batch;

struct _GstVisionBatcher
{
  /* the key, immutable; under the registry's lock: */
  vd_device_type device;
  gint device_index;
  vd_precision precision;
  gint n_threads;
  guint users;

  vd_context *lanes[MAX_CPU_LANES];     /* lanes[0] alone but on the CPU */
  guint n_lanes;
  GThread *dispatcher, *collector;
  gint64 last_done;             /* collector only */

  GMutex lock;
  GCond cond;                   /* the dispatcher's and the collector's */
  GCond done_cond;              /* the clients' waits */
  GQueue queued;                /* GstVisionBatchRequest *, oldest first */
  GQueue batches;               /* Batch *, taken off the queue, not finished */
  GQueue submitted;             /* of @batches, the collector's, in order */
  GPtrArray *clients;
  guint scan;
  gboolean quit;
  guint64 n_batches, n_frames;
};

static GMutex registry_lock;
static GPtrArray *registry;     /* GstVisionBatcher * */

static void
request_free (GstVisionBatchRequest * request)
{
  /* unmapped by the engine before it is done; a request never queued is
   * unmapped here */
  if (request->mapped)
    gst_video_frame_unmap (&request->frame);
  vd_result_clear (&request->result);
  g_clear_error (&request->error);
}

void
gst_vision_batch_request_unref (GstVisionBatchRequest * request)
{
  if (request != NULL)
    g_atomic_rc_box_release_full (request, (GDestroyNotify) request_free);
}

/* Unmaps the frames of @requests (not under the lock: the last reference to
 * a cancelled frame's buffer may go here, into its pool). */
static void
unmap_frames (GPtrArray * requests)
{
  for (guint i = 0; i < requests->len; i++) {
    GstVisionBatchRequest *r = g_ptr_array_index (requests, i);

    if (r->mapped) {
      gst_video_frame_unmap (&r->frame);
      r->mapped = FALSE;
    }
  }
}

static void
batch_free (Batch * batch)
{
  g_ptr_array_unref (batch->requests);
  g_clear_error (&batch->submit_error);
  g_free (batch);
}

/* ------------------------------------------------------------------------ */
/* Dispatcher                                                                */

static gboolean
same_group (const GstVisionBatchRequest * a, const GstVisionBatchRequest * b)
{
  return a->image.width == b->image.width && a->image.height == b->image.height
      && a->image.format == b->image.format
      && a->image.matrix == b->image.matrix
      && a->image.full_range == b->image.full_range
      && a->score_threshold == b->score_threshold
      && a->nms_threshold == b->nms_threshold
      && a->max_detections == b->max_detections;
}

/* No client can add a frame: each is idle or has max-in-flight outstanding. */
static gboolean
clients_saturated_locked (GstVisionBatcher * b)
{
  for (guint i = 0; i < b->clients->len; i++) {
    GstVisionBatcherClient *c = g_ptr_array_index (b->clients, i);

    if (!c->idle && c->outstanding < c->max_in_flight)
      return FALSE;
  }
  return TRUE;
}

/* The next batch's frames, taken off the queue (the requests' references move
 * to the array), or NULL with *@wake_at the time one is due (G_MAXINT64: none). Groups
 * are considered oldest first; one is due when full, when one of its frames
 * reaches its deadline, when it runs alone, or when waiting cannot fill it. */
static GPtrArray *
take_batch_locked (GstVisionBatcher * b, gint64 now, gint64 * wake_at)
{
  guint batch_size = 1;
  gboolean saturated = clients_saturated_locked (b);
  GList *l;

  for (guint i = 0; i < b->clients->len; i++)
    batch_size = MAX (batch_size,
        ((GstVisionBatcherClient *) g_ptr_array_index (b->clients,
                i))->batch_size);
  *wake_at = G_MAXINT64;
  b->scan++;

  for (l = b->queued.head; l != NULL; l = l->next) {
    GstVisionBatchRequest *head = l->data;
    GPtrArray *group;
    gint64 deadline = head->deadline;
    GList *m;

    if (head->scan == b->scan)
      continue;
    group = g_ptr_array_new ();
    g_ptr_array_add (group, head);
    head->scan = b->scan;
    for (m = l->next; m != NULL && !head->alone && group->len < batch_size;
        m = m->next) {
      GstVisionBatchRequest *r = m->data;

      if (r->scan == b->scan || r->alone || !same_group (head, r))
        continue;
      r->scan = b->scan;
      g_ptr_array_add (group, r);
      deadline = MIN (deadline, r->deadline);
    }
    if (head->alone || group->len >= batch_size || saturated || now >= deadline) {
      for (guint i = 0; i < group->len; i++) {
        GstVisionBatchRequest *r = g_ptr_array_index (group, i);

        g_queue_remove (&b->queued, r);
        r->state = REQUEST_SUBMITTED;
      }
      g_ptr_array_set_free_func (group,
          (GDestroyNotify) gst_vision_batch_request_unref);
      return group;
    }
    *wake_at = MIN (*wake_at, deadline);
    g_ptr_array_unref (group);
  }
  return NULL;
}

/* Hands @batch to the engine (not under the lock): its frames shared out among
 * the lanes in consecutive parts, as evenly as they go. */
static void
submit_batch (GstVisionBatcher * b, Batch * batch)
{
  GPtrArray *requests = batch->requests;
  const GstVisionBatchRequest *first = g_ptr_array_index (requests, 0);
  vd_image *images = g_new (vd_image, requests->len);
  guint n = requests->len, parts = MIN (n, b->n_lanes), next = 0;

  for (guint i = 0; i < n; i++)
    images[i] = ((GstVisionBatchRequest *) g_ptr_array_index (requests,
            i))->image;
  batch->submitted_at = g_get_monotonic_time ();
  for (guint p = 0; p < parts; p++) {
    guint count = n / parts + (p < n % parts ? 1 : 0);

    /* the producer thread of the context: the setters and vd_submit () */
    vd_context_set_thresholds (b->lanes[p], first->score_threshold,
        first->nms_threshold, first->max_detections);
    if (!vd_submit (b->lanes[p], images + next, (gint) count,
            &batch->submit_error)) {
      GST_WARNING ("could not submit a batch of %u frames: %s", n,
          batch->submit_error->message);
      break;
    }
    batch->part_first[p] = next;
    batch->part_n[p] = count;
    batch->n_parts = p + 1;
    next += count;
  }
  if (batch->submit_error == NULL)
    GST_LOG ("submitted a batch of %u frames (%dx%d) in %u parts", n,
        first->image.width, first->image.height, parts);
  g_free (images);
}

static gpointer
dispatcher_main (gpointer data)
{
  GstVisionBatcher *b = data;

  g_mutex_lock (&b->lock);
  while (!b->quit) {
    GPtrArray *requests;
    gint64 wake_at;
    Batch *batch;

    if (b->batches.length >= MAX_BATCHES_IN_FLIGHT
        || g_queue_is_empty (&b->queued)) {
      g_cond_wait (&b->cond, &b->lock);
      continue;
    }
    requests = take_batch_locked (b, g_get_monotonic_time (), &wake_at);
    if (requests == NULL) {
      g_cond_wait_until (&b->cond, &b->lock, wake_at);
      continue;
    }
    batch = g_new0 (Batch, 1);
    batch->requests = requests;
    /* from now on where gst_vision_batcher_client_cancel () finds its frames */
    g_queue_push_tail (&b->batches, batch);
    g_mutex_unlock (&b->lock);
    submit_batch (b, batch);
    g_mutex_lock (&b->lock);
    g_queue_push_tail (&b->submitted, batch);
    g_cond_broadcast (&b->cond);
  }
  g_mutex_unlock (&b->lock);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Collector                                                                 */

/* @batch is over: @results (NULL on failure, then @error) go to its frames. */
static void
finish_batch (GstVisionBatcher * b, Batch * batch, vd_result * results,
    GError * error, GstClockTime batch_time)
{
  GPtrArray *requests = batch->requests;
  guint n = requests->len;

  if (results == NULL && n > 1) {
    /* which frame failed is not known: each runs again alone, first */
    GPtrArray *cancelled = g_ptr_array_new_with_free_func ((GDestroyNotify)
        gst_vision_batch_request_unref);

    GST_INFO ("a batch of %u frames failed (%s): running them one by one", n,
        error->message);
    g_mutex_lock (&b->lock);
    g_queue_remove (&b->batches, batch);
    for (guint i = n; i-- > 0;) {
      GstVisionBatchRequest *r = g_ptr_array_index (requests, i);

      if (r->cancelled) {
        r->state = REQUEST_DONE;
        g_ptr_array_add (cancelled, r);
      } else {
        r->state = REQUEST_QUEUED;
        r->alone = TRUE;
        g_queue_push_head (&b->queued, r);
      }
    }
    g_ptr_array_set_free_func (requests, NULL);
    g_cond_broadcast (&b->cond);
    g_mutex_unlock (&b->lock);
    unmap_frames (cancelled);
    g_ptr_array_unref (cancelled);
    g_clear_error (&error);
    batch_free (batch);
    return;
  }

  /* unmapped before the clients see the result: the buffers are theirs alone
   * again */
  unmap_frames (requests);
  g_mutex_lock (&b->lock);
  g_queue_remove (&b->batches, batch);
  for (guint i = 0; i < n; i++) {
    GstVisionBatchRequest *r = g_ptr_array_index (requests, i);

    r->state = REQUEST_DONE;
    if (r->cancelled) {
      if (results != NULL)
        vd_result_clear (&results[i]);
      continue;
    }
    if (results != NULL) {
      r->result = results[i];
      r->batch_time = batch_time;
      r->batch_frames = n;
    } else {
      r->error = g_error_copy (error);
    }
    r->client->outstanding--;
  }
  if (results != NULL && ((GstVisionBatchRequest *)
          g_ptr_array_index (requests, 0))->counted) {
    b->n_batches++;
    b->n_frames += n;
  }
  g_cond_broadcast (&b->done_cond);
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
  g_clear_error (&error);
  batch_free (batch);
}

static gpointer
collector_main (gpointer data)
{
  GstVisionBatcher *b = data;

  g_mutex_lock (&b->lock);
  for (;;) {
    Batch *batch;
    vd_result *results = NULL;
    GError *error = NULL;
    gint64 done;
    guint n;

    while (!b->quit && g_queue_is_empty (&b->submitted))
      g_cond_wait (&b->cond, &b->lock);
    if (b->quit)
      break;
    batch = g_queue_pop_head (&b->submitted);
    g_mutex_unlock (&b->lock);

    n = batch->requests->len;
    results = g_new0 (vd_result, n);
    /* every part submitted is collected, whatever happened to the others */
    for (guint p = 0; p < batch->n_parts; p++) {
      vd_result *part = results + batch->part_first[p];
      GError *part_error = NULL;

      if (!vd_collect (b->lanes[p], part, (gint) batch->part_n[p], &part_error)) {
        if (error == NULL)
          error = part_error;
        else
          g_error_free (part_error);
      }
    }
    if (batch->submit_error != NULL && error == NULL) {
      error = batch->submit_error;
      batch->submit_error = NULL;
    }
    if (error != NULL) {
      for (guint i = 0; i < n; i++)
        vd_result_clear (&results[i]);
      g_clear_pointer (&results, g_free);
    }
    done = g_get_monotonic_time ();
    /* the engine's time for the batch: from its start (its submission, or the
     * end of the batch before it) to its end */
    finish_batch (b, batch, results, error,
        (GstClockTime) (done - MAX (batch->submitted_at,
                b->last_done)) * GST_USECOND);
    b->last_done = done;
    g_free (results);
    g_mutex_lock (&b->lock);
  }
  g_mutex_unlock (&b->lock);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Engines and clients                                                       */

static void
batcher_destroy (GstVisionBatcher * b)
{
  GstVisionBatchRequest *r;
  Batch *batch;

  g_mutex_lock (&b->lock);
  b->quit = TRUE;
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
  /* the collector waits for the batch running now */
  if (b->dispatcher != NULL)
    g_thread_join (b->dispatcher);
  if (b->collector != NULL)
    g_thread_join (b->collector);
  /* drops the batches not collected */
  for (guint i = 0; i < MAX_CPU_LANES; i++)
    vd_context_free (b->lanes[i]);
  /* every client has cancelled its frames: what is left is only released */
  g_queue_clear (&b->submitted);
  while ((batch = g_queue_pop_head (&b->batches)) != NULL) {
    unmap_frames (batch->requests);
    batch_free (batch);
  }
  while ((r = g_queue_pop_head (&b->queued)) != NULL) {
    if (r->mapped) {
      gst_video_frame_unmap (&r->frame);
      r->mapped = FALSE;
    }
    gst_vision_batch_request_unref (r);
  }
  g_ptr_array_unref (b->clients);
  g_mutex_clear (&b->lock);
  g_cond_clear (&b->cond);
  g_cond_clear (&b->done_cond);
  g_free (b);
}

/* A new engine, or NULL with @error set. Registry lock held. */
static GstVisionBatcher *
batcher_new (vd_model * model, const vd_context_params * params,
    GError ** error)
{
  GstVisionBatcher *b = g_new0 (GstVisionBatcher, 1);
  GError *thread_error = NULL;
  vd_context_params lane_params;
  gint threads;
  guint n;

  b->device = params->device;
  b->device_index = params->device_index;
  b->precision = params->precision;
  b->n_threads = params->n_threads;
  g_mutex_init (&b->lock);
  g_cond_init (&b->cond);
  g_cond_init (&b->done_cond);
  g_queue_init (&b->queued);
  g_queue_init (&b->batches);
  g_queue_init (&b->submitted);
  b->clients = g_ptr_array_new ();
  /* on the CPU: lanes, the threads shared out, a context of threads / n each */
  threads = params->n_threads > 0 ? params->n_threads :
      (gint) g_get_num_processors ();
  /* as many lanes as divide the threads evenly, up to MAX_CPU_LANES (6 threads:
   * 3 lanes of 2, not 4 of 1 with 2 threads idle; a prime above it: one) */
  for (n = MIN ((guint) MAX (threads, 1), MAX_CPU_LANES);
      threads % (gint) n != 0; n--);
  lane_params = *params;
  lane_params.n_threads = threads / (gint) n;
  b->n_lanes = 1;
  /* device=cpu: the first lane's context at once; otherwise the engine says
   * where it runs first (auto may fall back to the CPU), and on the CPU that
   * context is made again with the lane's threads */
  b->lanes[0] = vd_context_new (model, params->device == VD_DEVICE_CPU
      && n > 1 ? &lane_params : params, error);
  if (b->lanes[0] == NULL)
    goto out_free;
  if (vd_context_device (b->lanes[0]) == VD_DEVICE_CPU && n > 1) {
    if (params->device != VD_DEVICE_CPU) {
      vd_context_free (b->lanes[0]);
      b->lanes[0] = vd_context_new (model, &lane_params, error);
      if (b->lanes[0] == NULL)
        goto out_free;
    }
    for (guint i = 1; i < n; i++) {
      b->lanes[i] = vd_context_new (model, &lane_params, error);
      if (b->lanes[i] == NULL)
        goto out_free;
    }
    b->n_lanes = n;
    GST_INFO ("shared CPU engine: %u lanes of %d threads", n,
        lane_params.n_threads);
  }
  b->dispatcher = g_thread_try_new ("visiondetect-batch", dispatcher_main, b,
      &thread_error);
  if (b->dispatcher != NULL)
    b->collector = g_thread_try_new ("visiondetect-collect", collector_main, b,
        &thread_error);
  if (b->collector == NULL) {
    g_set_error (error, VD_ERROR, VD_ERROR_INTERNAL,
        "could not start the shared engine's threads: %s",
        thread_error->message);
    g_error_free (thread_error);
    goto out_free;
  }
  return b;

out_free:
  batcher_destroy (b);
  return NULL;
}

GstVisionBatcherClient *
gst_vision_batcher_client_new (vd_model * model,
    const vd_context_params * params, guint batch_size, GstClockTime timeout,
    guint max_in_flight, gboolean * created, GError ** error)
{
  GstVisionBatcher *b = NULL;
  GstVisionBatcherClient *client;

  GST_DEBUG_CATEGORY_INIT (gst_vision_batcher_debug, "visionbatcher", 0,
      "visiondetect shared batching engines");
  *created = FALSE;

  /* under the lock while the context is made: one engine per key */
  g_mutex_lock (&registry_lock);
  for (guint i = 0; registry != NULL && i < registry->len; i++) {
    GstVisionBatcher *e = g_ptr_array_index (registry, i);

    if (vd_context_model (e->lanes[0]) == model
        && e->device == params->device
        && e->device_index == params->device_index
        && e->precision == params->precision
        && e->n_threads == params->n_threads) {
      b = e;
      break;
    }
  }
  if (b == NULL) {
    b = batcher_new (model, params, error);
    if (b == NULL) {
      g_mutex_unlock (&registry_lock);
      return NULL;
    }
    if (registry == NULL)
      registry = g_ptr_array_new ();
    g_ptr_array_add (registry, b);
    *created = TRUE;
  }
  b->users++;

  client = g_new0 (GstVisionBatcherClient, 1);
  client->batcher = b;
  client->batch_size = MAX (batch_size, 1);
  /* rounded up: a timeout of 1 ns still waits */
  client->timeout_us = (gint64) ((MIN (timeout, G_MAXINT64 / 2) +
          GST_USECOND - 1) / GST_USECOND);
  client->max_in_flight = MAX (max_in_flight, 1);
  g_mutex_lock (&b->lock);
  g_ptr_array_add (b->clients, client);
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
  g_mutex_unlock (&registry_lock);
  return client;
}

void
gst_vision_batcher_client_free (GstVisionBatcherClient * client)
{
  GstVisionBatcher *b;
  gboolean last;

  if (client == NULL)
    return;
  b = client->batcher;
  gst_vision_batcher_client_cancel (client);
  g_mutex_lock (&b->lock);
  g_ptr_array_remove (b->clients, client);
  /* a batch that waited for this client may be due now */
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
  g_free (client);

  g_mutex_lock (&registry_lock);
  last = --b->users == 0;
  if (last) {
    g_ptr_array_remove (registry, b);
    if (registry->len == 0)
      g_clear_pointer (&registry, g_ptr_array_unref);
  }
  g_mutex_unlock (&registry_lock);
  if (last)
    batcher_destroy (b);
}

const vd_context *
gst_vision_batcher_client_context (GstVisionBatcherClient * client)
{
  return client->batcher->lanes[0];
}

GstVisionBatchRequest *
gst_vision_batcher_submit (GstVisionBatcherClient * client,
    GstVideoFrame * frame, const vd_image * image, gfloat score_threshold,
    gfloat nms_threshold, gint max_detections, gboolean alone)
{
  GstVisionBatcher *b = client->batcher;
  GstVisionBatchRequest *r = g_atomic_rc_box_new0 (GstVisionBatchRequest);

  r->client = client;
  r->frame = *frame;
  r->mapped = TRUE;
  r->image = *image;
  r->score_threshold = score_threshold;
  r->nms_threshold = nms_threshold;
  r->max_detections = max_detections;
  r->state = REQUEST_QUEUED;
  r->alone = alone;
  r->counted = !alone;

  g_mutex_lock (&b->lock);
  r->deadline = g_get_monotonic_time () + client->timeout_us;
  client->outstanding++;
  client->idle = FALSE;
  /* the engine's reference */
  g_queue_push_tail (&b->queued, g_atomic_rc_box_acquire (r));
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
  return r;
}

GstVisionBatchStatus
gst_vision_batcher_wait (GstVisionBatcherClient * client,
    GstVisionBatchRequest * request, vd_result * result,
    GstClockTime * batch_time, guint * batch_frames, GError ** error)
{
  GstVisionBatcher *b = client->batcher;
  GstVisionBatchStatus status;

  memset (result, 0, sizeof (*result));
  *batch_time = 0;
  *batch_frames = 0;
  g_mutex_lock (&b->lock);
  while (request->state != REQUEST_DONE && !request->cancelled)
    g_cond_wait (&b->done_cond, &b->lock);
  if (request->cancelled) {
    status = GST_VISION_BATCH_CANCELLED;
  } else if (request->error != NULL) {
    g_propagate_error (error, request->error);
    request->error = NULL;
    status = GST_VISION_BATCH_FAILED;
  } else {
    *result = request->result;
    memset (&request->result, 0, sizeof (request->result));
    *batch_time = request->batch_time;
    *batch_frames = request->batch_frames;
    status = GST_VISION_BATCH_DONE;
  }
  /* returned once */
  request->cancelled = TRUE;
  g_mutex_unlock (&b->lock);
  return status;
}

void
gst_vision_batcher_client_cancel (GstVisionBatcherClient * client)
{
  GstVisionBatcher *b = client->batcher;
  GPtrArray *dropped = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_vision_batch_request_unref);
  GList *l, *next;

  g_mutex_lock (&b->lock);
  for (l = b->queued.head; l != NULL; l = next) {
    GstVisionBatchRequest *r = l->data;

    next = l->next;
    if (r->client != client)
      continue;
    g_queue_delete_link (&b->queued, l);
    r->state = REQUEST_DONE;
    r->cancelled = TRUE;
    r->client = NULL;
    g_ptr_array_add (dropped, r);
  }
  /* running: the collector finishes them and drops their results */
  for (l = b->batches.head; l != NULL; l = l->next) {
    Batch *batch = l->data;

    for (guint i = 0; i < batch->requests->len; i++) {
      GstVisionBatchRequest *r = g_ptr_array_index (batch->requests, i);

      if (r->client == client) {
        r->cancelled = TRUE;
        r->client = NULL;
      }
    }
  }
  client->outstanding = 0;
  g_cond_broadcast (&b->done_cond);
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
  unmap_frames (dropped);
  g_ptr_array_unref (dropped);
}

void
gst_vision_batcher_client_set_idle (GstVisionBatcherClient * client,
    gboolean idle)
{
  GstVisionBatcher *b = client->batcher;

  g_mutex_lock (&b->lock);
  client->idle = idle;
  g_cond_broadcast (&b->cond);
  g_mutex_unlock (&b->lock);
}

gdouble
gst_vision_batcher_client_mean_batch_size (GstVisionBatcherClient * client)
{
  GstVisionBatcher *b = client->batcher;
  gdouble mean;

  g_mutex_lock (&b->lock);
  mean = b->n_batches > 0 ? (gdouble) b->n_frames / (gdouble) b->n_batches :
      0.0;
  g_mutex_unlock (&b->lock);
  return mean;
}
