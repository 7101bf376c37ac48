/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionmqtt: a passthrough element that publishes each frame's detections,
 * as visionjson's JSON line, to an MQTT broker (libmosquitto). */

/**
 * SECTION:element-visionmqtt
 * @title: visionmqtt
 *
 * visionmqtt publishes one MQTT message per frame to #GstVisionMqtt:topic on
 * the broker #GstVisionMqtt:host:#GstVisionMqtt:port. The payload is exactly
 * the line visionjson writes for the same frame (without the newline). The
 * video passes unchanged, so the element sits in a pipeline that also displays
 * or records.
 *
 * The streaming thread never waits for the network: messages go into a queue
 * of at most #GstVisionMqtt:max-queue messages, which the element's network
 * thread hands to the broker, at most #GstVisionMqtt:max-inflight at a time.
 * When the broker is away the element reconnects with a growing delay, and
 * a full queue drops its oldest message, with one warning on the bus per
 * outage. #GstVisionMqtt:published counts the messages written to the socket
 * (QoS 0) or acknowledged by the broker (QoS 1), #GstVisionMqtt:dropped the
 * ones discarded. At EOS the queue is flushed for at most
 * #GstVisionMqtt:flush-timeout before EOS goes downstream.
 *
 * A broker that refuses the connection (bad user name or password, not
 * authorised, client id rejected), a failed TLS handshake, an unreadable
 * certificate file, an invalid topic and a host name that does not resolve
 * are element errors.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 v4l2src ! decodebin ! videoconvert ! visiondetect ! \
 *     visionmqtt host=broker.lan source-id=door \
 *     topic=sites/lab/cameras/{source-id}/detections ! \
 *     visionoverlay ! videoconvert ! autovideosink
 * ]|
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstvisionmqtt.h"
#include "helpers/jsonframe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <gst/video/video.h>
#include <mosquitto.h>

GST_DEBUG_CATEGORY_STATIC (gst_vision_mqtt_debug);
#define GST_CAT_DEFAULT gst_vision_mqtt_debug

#define DEFAULT_HOST "localhost"
#define DEFAULT_PORT 1883
#define DEFAULT_TOPIC "visiondetect/{hostname}/{source-id}/detections"
#define DEFAULT_QOS 1
#define DEFAULT_KEEPALIVE 60
#define DEFAULT_MAX_QUEUE 1000
#define DEFAULT_MAX_INFLIGHT 20
#define DEFAULT_FLUSH_TIMEOUT 5000
#define DEFAULT_RECONNECT_DELAY_MAX 30

/* the first reconnection waits about this long, each failure doubles it */
#define RECONNECT_DELAY_MIN_MS 250
/* how long the network thread waits in select() without traffic */
#define LOOP_TIMEOUT_MS 1000
/* how long stopping waits for the last acknowledgements, then for the
 * DISCONNECT to go out */
#define STOP_ACK_WAIT_US (G_USEC_PER_SEC)
#define STOP_GRACE_US (2 * G_USEC_PER_SEC)

#define STATUS_ONLINE "{\"status\":\"online\"}"
#define STATUS_OFFLINE "{\"status\":\"offline\"}"

enum
{
  PROP_0,
  PROP_HOST,
  PROP_PORT,
  PROP_TOPIC,
  PROP_SOURCE_ID,
  PROP_STATUS_TOPIC,
  PROP_QOS,
  PROP_CLIENT_ID,
  PROP_USERNAME,
  PROP_PASSWORD,
  PROP_CAFILE,
  PROP_CERTFILE,
  PROP_KEYFILE,
  PROP_KEEPALIVE,
  PROP_MAX_QUEUE,
  PROP_MAX_INFLIGHT,
  PROP_FLUSH_TIMEOUT,
  PROP_RECONNECT_DELAY_MAX,
  PROP_CONNECTED,
  PROP_PUBLISHED,
  PROP_DROPPED,
};

struct _GstVisionMqtt
{
  GstBaseTransform parent;

  /* properties, protected by the object lock */
  gchar *host;
  gint port;
  gchar *topic_template;
  gchar *source_id;
  gchar *status_topic_template;
  guint qos;
  gchar *client_id;
  gchar *username;
  gchar *password;
  gchar *cafile;
  gchar *certfile;
  gchar *keyfile;
  guint keepalive;
  guint max_queue;
  guint max_inflight;
  guint flush_timeout;
  guint reconnect_delay_max;

  /* streaming thread only */
  GstVideoInfo info;
  gboolean have_info;
  guint64 frame_count;

  /* the session: set by start(), constant until stop() */
  struct mosquitto *mosq;
  GThread *network_thread;
  gchar *broker;                /* "host:port", for the messages */
  gchar *active_host;
  gint active_port;
  gint active_keepalive;
  gchar *topic;
  gchar *status_topic;          /* NULL: no status messages */
  gint active_qos;
  guint active_max_queue;
  guint active_max_inflight;
  guint active_reconnect_delay_max;
  GBytes *status_online;

  /* shared by the streaming thread, the network thread (and libmosquitto's
   * callbacks, which run in it) and the application, protected by lock.
   * Never held while calling libmosquitto or posting a message. */
  GMutex lock;
  GCond cond;                   /* queue, in flight, connection, stop changed */
  GQueue queue;                 /* GBytes payloads not handed over yet */
  GHashTable *in_flight;        /* mids handed over, not yet published */
  GHashTable *early_acks;       /* mids acked before their publish returned */
  GHashTable *status_mids;      /* mids of status messages (not counted) */
  guint n_in_flight;            /* in_flight plus the one being handed over */
  guint64 epoch;                /* connections lost so far */
  gboolean pumping;             /* a thread is handing messages over */
  gboolean connected;           /* CONNACK accepted, connection not yet lost */
  gboolean session_up;          /* connected since connection_ended() ran */
  gboolean status_pending;      /* publish the online status first */
  gboolean outage;              /* not connected since a failure was reported */
  gboolean drop_warned;         /* dropping reported for this outage */
  guint64 dropped_before_outage;
  gboolean fatal;               /* an element error was posted: give up */
  gboolean stopping;
  gboolean flushing;
  gint last_errno;
  gchar *last_log_error;
  gboolean tls_failed;          /* this attempt's TLS handshake failed (OpenSSL) */
  guint64 published;
  guint64 dropped;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));

#define gst_vision_mqtt_parent_class parent_class
G_DEFINE_TYPE (GstVisionMqtt, gst_vision_mqtt, GST_TYPE_BASE_TRANSFORM);
GST_ELEMENT_REGISTER_DEFINE (visionmqtt, "visionmqtt", GST_RANK_NONE,
    GST_TYPE_VISION_MQTT);

/* A template value that would change the topic's levels or make it a filter. */
static gboolean
topic_value_is_valid (const gchar * value)
{
  return *value != '\0' && strpbrk (value, "/+#") == NULL;
}

/* Expands {element}, {source-id} and {hostname} in @template; NULL with
 * @error_message set when a placeholder is unknown, a value would add topic
 * levels or wildcards, or the result is not a valid MQTT topic name. */
static gchar *
expand_topic (const gchar * template, const gchar * element,
    const gchar * source_id, gchar ** error_message)
{
  GString *topic = g_string_new (NULL);
  const gchar *p = template;

  while (*p != '\0') {
    const gchar *close, *value = NULL;
    gchar *name;

    if (*p != '{') {
      g_string_append_c (topic, *p++);
      continue;
    }
    close = strchr (p, '}');
    if (close == NULL) {
      *error_message = g_strdup_printf ("topic \"%s\": \"{\" without \"}\"",
          template);
      goto out_fail;
    }
    name = g_strndup (p + 1, close - p - 1);
    if (strcmp (name, "element") == 0)
      value = element;
    else if (strcmp (name, "source-id") == 0)
      value = source_id;
    else if (strcmp (name, "hostname") == 0)
      value = g_get_host_name ();
    if (value == NULL) {
      *error_message = g_strdup_printf ("topic \"%s\": unknown placeholder "
          "{%s} (known: {element}, {source-id}, {hostname})", template, name);
      g_free (name);
      goto out_fail;
    }
    if (!topic_value_is_valid (value)) {
      *error_message = g_strdup_printf ("topic \"%s\": {%s} is \"%s\", which "
          "is empty or has a '/', '+' or '#'", template, name, value);
      g_free (name);
      goto out_fail;
    }
    g_free (name);
    g_string_append (topic, value);
    p = close + 1;
  }

  if (topic->len == 0 || topic->len > 65535
      || mosquitto_pub_topic_check2 (topic->str, topic->len) != MOSQ_ERR_SUCCESS
      || !g_utf8_validate (topic->str, topic->len, NULL)) {
    *error_message = g_strdup_printf ("topic \"%s\" expands to \"%s\", which "
        "is not a valid MQTT topic name (empty, wildcards '+' or '#', or not "
        "UTF-8)", template, topic->str);
    goto out_fail;
  }
  return g_string_free (topic, FALSE);

out_fail:
  g_string_free (topic, TRUE);
  return NULL;
}

/* Why the connection ended or could not be made, for the bus. */
static gchar *
describe_failure (GstVisionMqtt * self, gint rc, gint err)
{
  if ((rc == MOSQ_ERR_TLS || self->tls_failed) && self->last_log_error != NULL)
    return g_strdup_printf ("%s (%s)", rc == MOSQ_ERR_ERRNO ? g_strerror (err)
        : mosquitto_strerror (rc), self->last_log_error);
  if (rc == MOSQ_ERR_ERRNO)
    return g_strdup (g_strerror (err));
  return g_strdup (mosquitto_strerror (rc));
}

/* The connection is gone: QoS 0 messages that libmosquitto had not written
 * are discarded by it, so they are counted dropped; QoS 1 ones stay in
 * libmosquitto and are sent again after the reconnection. Lock held. */
static void
mark_disconnected_locked (GstVisionMqtt * self)
{
  if (!self->connected)
    return;
  self->connected = FALSE;
  self->epoch++;
  if (self->active_qos == 0) {
    guint lost = g_hash_table_size (self->in_flight);

    self->dropped += lost;
    self->n_in_flight -= lost;
    g_hash_table_remove_all (self->in_flight);
  }
  g_cond_broadcast (&self->cond);
}

/* libmosquitto's callbacks: in the network thread, inside mosquitto_loop() */

static void
on_connect (struct mosquitto *mosq, void *user_data, int rc)
{
  GstVisionMqtt *self = user_data;
  gboolean was_outage;
  guint64 dropped;

  if (rc != 0) {
    /* 3, server unavailable, is temporary: connection_ended() retries */
    if (rc != 3) {
      g_mutex_lock (&self->lock);
      self->fatal = TRUE;
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      /* 4 and 5: bad user name or password, not authorised */
      if (rc == 4 || rc == 5)
        GST_ELEMENT_ERROR (self, RESOURCE, NOT_AUTHORIZED,
            ("The MQTT broker %s refused the connection: %s", self->broker,
                mosquitto_connack_string (rc)), ("CONNACK return code %d", rc));
      else
        GST_ELEMENT_ERROR (self, RESOURCE, OPEN_WRITE,
            ("The MQTT broker %s refused the connection: %s", self->broker,
                mosquitto_connack_string (rc)), ("CONNACK return code %d", rc));
    }
    return;
  }

  g_mutex_lock (&self->lock);
  self->connected = TRUE;
  self->session_up = TRUE;
  self->status_pending = self->status_topic != NULL;
  was_outage = self->outage;
  dropped = self->dropped - self->dropped_before_outage;
  self->outage = FALSE;
  self->drop_warned = FALSE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);

  GST_INFO_OBJECT (self, "connected to %s", self->broker);
  if (was_outage)
    GST_ELEMENT_INFO (self, RESOURCE, OPEN_WRITE,
        ("Connected to the MQTT broker %s again; %" G_GUINT64_FORMAT
            " messages were dropped while it was away", self->broker, dropped),
        (NULL));
}

static void
on_disconnect (struct mosquitto *mosq, void *user_data, int rc)
{
  GstVisionMqtt *self = user_data;
  gint err = errno;

  GST_DEBUG_OBJECT (self, "disconnected: %s", mosquitto_strerror (rc));
  g_mutex_lock (&self->lock);
  self->last_errno = err;
  mark_disconnected_locked (self);
  g_mutex_unlock (&self->lock);
}

static void
on_publish (struct mosquitto *mosq, void *user_data, int mid)
{
  GstVisionMqtt *self = user_data;
  gpointer key = GINT_TO_POINTER (mid);

  g_mutex_lock (&self->lock);
  if (g_hash_table_remove (self->in_flight, key)) {
    self->published++;
    self->n_in_flight--;
    g_cond_broadcast (&self->cond);
  } else if (g_hash_table_remove (self->status_mids, key)) {
    g_cond_broadcast (&self->cond);
  } else {
    /* mosquitto_publish() has not returned this mid yet */
    g_hash_table_add (self->early_acks, key);
  }
  g_mutex_unlock (&self->lock);
}

static void
on_log (struct mosquitto *mosq, void *user_data, int level, const char *str)
{
  GstVisionMqtt *self = user_data;

  if (level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING)) {
    GST_WARNING_OBJECT (self, "libmosquitto: %s", str);
    if (level & MOSQ_LOG_ERR) {
      g_mutex_lock (&self->lock);
      g_free (self->last_log_error);
      self->last_log_error = g_strdup (str);
      /* libmosquitto 2.0.21 (Debian 13) ends an asynchronous connect whose TLS
       * handshake failed with MOSQ_ERR_ERRNO (EPROTO), not MOSQ_ERR_TLS as
       * 2.0.11 (Debian 12) does; the OpenSSL error it logs first says which */
      if (g_str_has_prefix (str, "OpenSSL Error"))
        self->tls_failed = TRUE;
      g_mutex_unlock (&self->lock);
    }
  } else {
    GST_LOG_OBJECT (self, "libmosquitto: %s", str);
  }
}

/* Hands queued messages to libmosquitto while connected, up to max-inflight,
 * in queue order: one thread at a time (the streaming thread after queueing,
 * the network thread after each loop), libmosquitto called without the lock. */
static void
gst_vision_mqtt_pump (GstVisionMqtt * self)
{
  g_mutex_lock (&self->lock);
  if (self->pumping) {
    /* the other thread looks at the queue again after its publish */
    g_mutex_unlock (&self->lock);
    return;
  }
  self->pumping = TRUE;
  while (self->connected && !self->stopping && !self->fatal) {
    gboolean status = self->status_pending;
    const gchar *topic = status ? self->status_topic : self->topic;
    GBytes *message;
    gconstpointer data;
    gsize size;
    guint64 epoch = self->epoch;
    gint rc, mid = 0;

    if (status) {
      self->status_pending = FALSE;
      message = g_bytes_ref (self->status_online);
    } else {
      if (self->n_in_flight >= self->active_max_inflight
          || g_queue_is_empty (&self->queue))
        break;
      message = g_queue_pop_head (&self->queue);
      self->n_in_flight++;
    }
    g_mutex_unlock (&self->lock);

    data = g_bytes_get_data (message, &size);
    rc = mosquitto_publish (self->mosq, &mid, topic, (int) size, data,
        self->active_qos, status);

    g_mutex_lock (&self->lock);
    if (status) {
      /* best effort: the next connection announces itself again */
      if (rc == MOSQ_ERR_SUCCESS || (rc == MOSQ_ERR_NO_CONN
              && self->active_qos > 0)) {
        if (!g_hash_table_remove (self->early_acks, GINT_TO_POINTER (mid)))
          g_hash_table_add (self->status_mids, GINT_TO_POINTER (mid));
      }
      g_bytes_unref (message);
      if (rc == MOSQ_ERR_NO_CONN)
        break;
      continue;
    }
    /* a QoS 1 message that finds no connection is kept by libmosquitto and
     * sent when it reconnects: in flight all the same */
    if (rc == MOSQ_ERR_SUCCESS || (rc == MOSQ_ERR_NO_CONN
            && self->active_qos > 0)) {
      g_bytes_unref (message);
      if (g_hash_table_remove (self->early_acks, GINT_TO_POINTER (mid))) {
        self->published++;
        self->n_in_flight--;
        g_cond_broadcast (&self->cond);
      } else if (self->active_qos == 0 && epoch != self->epoch) {
        /* the connection it was queued on was lost meanwhile */
        self->dropped++;
        self->n_in_flight--;
        g_cond_broadcast (&self->cond);
      } else {
        g_hash_table_add (self->in_flight, GINT_TO_POINTER (mid));
      }
      if (rc == MOSQ_ERR_NO_CONN)
        break;
    } else if (rc == MOSQ_ERR_NO_CONN) {
      /* QoS 0 and the socket is gone: back to the head of the queue, for
       * the next connection */
      g_queue_push_head (&self->queue, message);
      self->n_in_flight--;
      break;
    } else {
      /* a message this broker can never take (too large), out of memory */
      GST_WARNING_OBJECT (self, "could not publish a message: %s",
          mosquitto_strerror (rc));
      g_bytes_unref (message);
      self->dropped++;
      self->n_in_flight--;
      g_cond_broadcast (&self->cond);
    }
  }
  self->pumping = FALSE;
  g_mutex_unlock (&self->lock);
}

/* The connection, or the attempt to make one, ended with @rc: report it once
 * per outage, or as an element error when retrying cannot help. Lock held
 * (released while posting). Returns whether to try again. */
static gboolean
connection_ended (GstVisionMqtt * self, gint rc, gint err)
{
  gboolean was_connected = self->session_up;
  gboolean fatal, warn = FALSE;
  gchar *reason;

  mark_disconnected_locked (self);
  self->session_up = FALSE;
  if (self->fatal || self->stopping)
    return FALSE;

  reason = describe_failure (self, rc, err);
  /* a TLS failure (certificate not trusted, wrong host name, bad key) or a
   * configuration libmosquitto refuses does not mend itself */
  fatal = rc == MOSQ_ERR_TLS || rc == MOSQ_ERR_INVAL
      || rc == MOSQ_ERR_NOT_SUPPORTED || (self->tls_failed && !was_connected);
  if (fatal) {
    self->fatal = TRUE;
    g_cond_broadcast (&self->cond);
  } else if (!self->outage) {
    self->outage = TRUE;
    self->dropped_before_outage = self->dropped;
    warn = TRUE;
  }
  g_mutex_unlock (&self->lock);

  GST_DEBUG_OBJECT (self, "connection to %s ended: %s", self->broker, reason);
  if (fatal) {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_WRITE,
        ("Could not connect to the MQTT broker %s: %s", self->broker, reason),
        ("libmosquitto error %d", rc));
  } else if (warn) {
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE,
        ("%s the MQTT broker %s: %s; reconnecting (messages are queued, at "
            "most %u, the oldest dropped beyond)", was_connected ?
            "Lost the connection to" : "Could not connect to", self->broker,
            reason, self->active_max_queue), (NULL));
  }
  g_free (reason);

  g_mutex_lock (&self->lock);
  return !fatal;
}

/* The network thread: connects, runs libmosquitto's loop (which calls the
 * callbacks above), hands messages over, reconnects with a growing delay.
 * Ours rather than mosquitto_loop_start()'s: that one reconnects with a
 * blocking connect that only pthread_cancel() interrupts, and ends quietly
 * on a TLS error; here connections are non-blocking, every failure is seen
 * and the delay is spread at random. */
static gpointer
gst_vision_mqtt_network_thread (gpointer user_data)
{
  GstVisionMqtt *self = user_data;
  gboolean first = TRUE;
  guint failures = 0;
  gint64 next_attempt = 0;

  g_mutex_lock (&self->lock);
  while (!self->stopping && !self->fatal) {
    gint rc, err;
    gint64 stop_deadline = 0;

    if (g_get_monotonic_time () < next_attempt) {
      g_cond_wait_until (&self->cond, &self->lock, next_attempt);
      continue;
    }
    self->tls_failed = FALSE;
    g_mutex_unlock (&self->lock);

    /* resolves the name (blocking) and starts a non-blocking connect */
    if (first)
      rc = mosquitto_connect_async (self->mosq, self->active_host,
          self->active_port, self->active_keepalive);
    else
      rc = mosquitto_reconnect_async (self->mosq);
    err = errno;
    first = FALSE;

    while (rc == MOSQ_ERR_SUCCESS) {
      gboolean stopping;

      rc = mosquitto_loop (self->mosq, LOOP_TIMEOUT_MS, 1);
      err = errno;
      gst_vision_mqtt_pump (self);
      g_mutex_lock (&self->lock);
      stopping = self->stopping;
      if (self->session_up)
        failures = 0;
      g_mutex_unlock (&self->lock);
      /* stop() queued a DISCONNECT: give it a little time to go out */
      if (stopping) {
        if (stop_deadline == 0)
          stop_deadline = g_get_monotonic_time () + STOP_GRACE_US;
        else if (g_get_monotonic_time () > stop_deadline)
          break;
      }
    }

    g_mutex_lock (&self->lock);
    if (!connection_ended (self, rc, err))
      break;
    {
      /* 250 ms doubling up to reconnect-delay-max, each from half to all of
       * it: a fleet of pipelines does not come back all at once */
      gint64 delay_ms = (gint64) RECONNECT_DELAY_MIN_MS << MIN (failures, 20);
      gint64 max_ms = (gint64) self->active_reconnect_delay_max * 1000;

      delay_ms = MIN (delay_ms, max_ms);
      delay_ms = (gint64) (delay_ms * g_random_double_range (0.5, 1.0));
      next_attempt = g_get_monotonic_time () + delay_ms * 1000;
      failures++;
    }
  }
  g_mutex_unlock (&self->lock);
  return NULL;
}

static GstFlowReturn
gst_vision_mqtt_transform_ip (GstBaseTransform * trans, GstBuffer * buffer)
{
  GstVisionMqtt *self = GST_VISION_MQTT (trans);
  guint64 frame_index;
  gboolean warn_drop = FALSE, fatal;
  gchar *json;
  gsize length;

  if (G_UNLIKELY (!self->have_info)) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL), ("frame before caps"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
  /* numbered and filtered as visionjson does */
  if (!gst_vision_json_frame_in_segment (&trans->segment, buffer))
    return GST_FLOW_OK;
  frame_index = self->frame_count++;

  json = gst_vision_json_frame_to_string (buffer, &trans->segment,
      GST_VIDEO_INFO_WIDTH (&self->info), GST_VIDEO_INFO_HEIGHT (&self->info),
      frame_index, GST_VISION_JSON_FORMAT_VISIONDETECT);
  length = strlen (json);

  g_mutex_lock (&self->lock);
  fatal = self->fatal;
  if (!fatal) {
    if (g_queue_get_length (&self->queue) >= self->active_max_queue) {
      g_bytes_unref (g_queue_pop_head (&self->queue));
      self->dropped++;
      if (!self->drop_warned) {
        self->drop_warned = TRUE;
        warn_drop = TRUE;
      }
    }
    g_queue_push_tail (&self->queue, g_bytes_new_take (json, length));
  } else {
    g_free (json);
  }
  g_mutex_unlock (&self->lock);

  /* the error itself was posted where it was found */
  if (fatal)
    return GST_FLOW_ERROR;
  if (warn_drop)
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE,
        ("The MQTT queue is full (%u messages, the broker %s is away or too "
            "slow): dropping the oldest messages", self->active_max_queue,
            self->broker), (NULL));
  gst_vision_mqtt_pump (self);
  return GST_FLOW_OK;
}

/* Waits until the queue is published, for at most flush-timeout. */
static void
gst_vision_mqtt_flush (GstVisionMqtt * self)
{
  guint timeout_ms, remaining;
  gint64 deadline;
  gboolean fatal;

  GST_OBJECT_LOCK (self);
  timeout_ms = self->flush_timeout;
  GST_OBJECT_UNLOCK (self);

  deadline = g_get_monotonic_time () + (gint64) timeout_ms *1000;
  g_mutex_lock (&self->lock);
  while (!self->fatal && !self->flushing && !self->stopping
      && (!g_queue_is_empty (&self->queue) || self->n_in_flight > 0)) {
    if (!g_cond_wait_until (&self->cond, &self->lock, deadline))
      break;
  }
  remaining = g_queue_get_length (&self->queue) + self->n_in_flight;
  fatal = self->fatal;
  g_mutex_unlock (&self->lock);

  if (remaining > 0 && !fatal)
    GST_ELEMENT_WARNING (self, RESOURCE, WRITE,
        ("%u MQTT messages were not published to %s within flush-timeout "
            "(%u ms) at the end of the stream", remaining, self->broker,
            timeout_ms), (NULL));
}

static gboolean
gst_vision_mqtt_sink_event (GstBaseTransform * trans, GstEvent * event)
{
  GstVisionMqtt *self = GST_VISION_MQTT (trans);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_EOS:
      if (self->mosq != NULL)
        gst_vision_mqtt_flush (self);
      break;
    case GST_EVENT_FLUSH_START:
      g_mutex_lock (&self->lock);
      self->flushing = TRUE;
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      break;
    case GST_EVENT_FLUSH_STOP:
      g_mutex_lock (&self->lock);
      self->flushing = FALSE;
      g_mutex_unlock (&self->lock);
      /* `frame` as visionjson writes it: from 0 again after a flush */
      self->frame_count = 0;
      break;
    default:
      break;
  }
  return GST_BASE_TRANSFORM_CLASS (parent_class)->sink_event (trans, event);
}

static gboolean
gst_vision_mqtt_set_caps (GstBaseTransform * trans, GstCaps * incaps,
    GstCaps * outcaps)
{
  GstVisionMqtt *self = GST_VISION_MQTT (trans);

  if (!gst_video_info_from_caps (&self->info, incaps)) {
    GST_ERROR_OBJECT (self, "invalid caps %" GST_PTR_FORMAT, incaps);
    return FALSE;
  }
  self->have_info = TRUE;
  return TRUE;
}

/* libmosquitto would otherwise ask for an encrypted key's passphrase on the
 * terminal */
static int
no_key_password (char *buf, int size, int rwflag, void *user_data)
{
  return 0;
}

static gboolean
check_readable (GstVisionMqtt * self, const gchar * what, const gchar * path)
{
  int fd;

  if (path == NULL)
    return TRUE;
  fd = g_open (path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;

    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ,
        ("Could not read the %s \"%s\": %s", what, path, g_strerror (err)),
        (NULL));
    return FALSE;
  }
  close (fd);
  return TRUE;
}

/* The broker's host name must resolve when the element starts (an address
 * that resolves but does not answer is retried like an outage). */
static gboolean
check_resolves (GstVisionMqtt * self, const gchar * host, gint port)
{
  struct addrinfo hints, *addresses = NULL;
  gchar service[8];
  int rc;

  memset (&hints, 0, sizeof (hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  g_snprintf (service, sizeof (service), "%d", port);
  rc = getaddrinfo (host, service, &hints, &addresses);
  if (rc != 0) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("Could not resolve the MQTT broker host \"%s\": %s", host,
            rc == EAI_SYSTEM ? g_strerror (errno) : gai_strerror (rc)),
        ("getaddrinfo() returned %d", rc));
    return FALSE;
  }
  freeaddrinfo (addresses);
  return TRUE;
}

static gpointer
init_mosquitto_once (gpointer data)
{
  /* once per process, never undone: other users of libmosquitto in the
   * process may need it after us */
  mosquitto_lib_init ();
  return NULL;
}

static void
clear_session (GstVisionMqtt * self)
{
  if (self->mosq != NULL) {
    mosquitto_destroy (self->mosq);
    self->mosq = NULL;
  }
  g_clear_pointer (&self->broker, g_free);
  g_clear_pointer (&self->active_host, g_free);
  g_clear_pointer (&self->topic, g_free);
  g_clear_pointer (&self->status_topic, g_free);
  g_clear_pointer (&self->status_online, g_bytes_unref);

  g_mutex_lock (&self->lock);
  /* what was never published is lost now */
  self->dropped += g_queue_get_length (&self->queue) + self->n_in_flight;
  g_queue_clear_full (&self->queue, (GDestroyNotify) g_bytes_unref);
  g_hash_table_remove_all (self->in_flight);
  g_hash_table_remove_all (self->early_acks);
  g_hash_table_remove_all (self->status_mids);
  self->n_in_flight = 0;
  self->connected = FALSE;
  self->session_up = FALSE;
  g_clear_pointer (&self->last_log_error, g_free);
  g_mutex_unlock (&self->lock);
}

static gboolean
gst_vision_mqtt_start (GstBaseTransform * trans)
{
  static GOnce init_once = G_ONCE_INIT;
  GstVisionMqtt *self = GST_VISION_MQTT (trans);
  gchar *element_name = gst_object_get_name (GST_OBJECT (self));
  gchar *host, *topic_template, *source_id, *status_template, *client_id;
  gchar *username, *password, *cafile, *certfile, *keyfile;
  gchar *error_message = NULL;
  gboolean ok = FALSE;
  gint rc;

  g_once (&init_once, init_mosquitto_once, NULL);

  GST_OBJECT_LOCK (self);
  host = g_strdup (self->host);
  self->active_port = self->port;
  topic_template = g_strdup (self->topic_template);
  source_id = g_strdup (self->source_id ? self->source_id : element_name);
  status_template = g_strdup (self->status_topic_template);
  self->active_qos = self->qos;
  client_id = g_strdup (self->client_id);
  username = g_strdup (self->username);
  password = g_strdup (self->password);
  cafile = g_strdup (self->cafile);
  certfile = g_strdup (self->certfile);
  keyfile = g_strdup (self->keyfile);
  self->active_keepalive = self->keepalive;
  self->active_max_queue = self->max_queue;
  self->active_max_inflight = self->max_inflight;
  self->active_reconnect_delay_max = self->reconnect_delay_max;
  GST_OBJECT_UNLOCK (self);

  /* empty strings from gst-launch mean unset */
#define UNSET_IF_EMPTY(s) \
  if ((s) != NULL && *(s) == '\0') g_clear_pointer (&(s), g_free)
  UNSET_IF_EMPTY (status_template);
  UNSET_IF_EMPTY (client_id);
  UNSET_IF_EMPTY (username);
  UNSET_IF_EMPTY (password);
  UNSET_IF_EMPTY (cafile);
  UNSET_IF_EMPTY (certfile);
  UNSET_IF_EMPTY (keyfile);
#undef UNSET_IF_EMPTY

  if (host == NULL || *host == '\0') {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("No MQTT broker host set"),
        (NULL));
    goto out;
  }
  self->broker = g_strdup_printf (strchr (host, ':') ? "[%s]:%d" : "%s:%d",
      host, self->active_port);
  self->active_host = g_strdup (host);

  self->topic = expand_topic (topic_template ? topic_template : "",
      element_name, source_id, &error_message);
  if (self->topic == NULL)
    goto out_settings_error;
  if (status_template != NULL) {
    self->status_topic = expand_topic (status_template, element_name,
        source_id, &error_message);
    if (self->status_topic == NULL)
      goto out_settings_error;
  }
  if (password != NULL && username == NULL) {
    error_message = g_strdup ("a password needs a username");
    goto out_settings_error;
  }
  if ((certfile == NULL) != (keyfile == NULL)) {
    error_message = g_strdup ("certfile and keyfile go together");
    goto out_settings_error;
  }
  if (certfile != NULL && cafile == NULL) {
    error_message = g_strdup ("a client certificate needs cafile (TLS)");
    goto out_settings_error;
  }
  if (!check_readable (self, "CA file", cafile)
      || !check_readable (self, "certificate file", certfile)
      || !check_readable (self, "key file", keyfile)
      || !check_resolves (self, host, self->active_port))
    goto out;

  self->mosq = mosquitto_new (client_id, true, self);
  if (self->mosq == NULL) {
    GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
        ("Could not create the MQTT client%s%s%s: %s",
            client_id ? " \"" : "", client_id ? client_id : "",
            client_id ? "\"" : "", g_strerror (errno)), (NULL));
    goto out;
  }
  /* the streaming thread publishes: libmosquitto must not write the socket
   * from it, only the network thread does */
  mosquitto_threaded_set (self->mosq, true);
  mosquitto_int_option (self->mosq, MOSQ_OPT_PROTOCOL_VERSION,
      MQTT_PROTOCOL_V311);
  mosquitto_int_option (self->mosq, MOSQ_OPT_TCP_NODELAY, 1);
  /* our own bound, plus the status message */
  mosquitto_max_inflight_messages_set (self->mosq,
      self->active_max_inflight + 1);
  mosquitto_connect_callback_set (self->mosq, on_connect);
  mosquitto_disconnect_callback_set (self->mosq, on_disconnect);
  mosquitto_publish_callback_set (self->mosq, on_publish);
  mosquitto_log_callback_set (self->mosq, on_log);

  if (username != NULL) {
    rc = mosquitto_username_pw_set (self->mosq, username, password);
    if (rc != MOSQ_ERR_SUCCESS) {
      error_message = g_strdup_printf ("username or password: %s",
          mosquitto_strerror (rc));
      goto out_settings_error;
    }
  }
  if (cafile != NULL) {
    rc = mosquitto_tls_set (self->mosq, cafile, NULL, certfile, keyfile,
        no_key_password);
    if (rc != MOSQ_ERR_SUCCESS) {
      error_message = g_strdup_printf ("TLS files: %s",
          mosquitto_strerror (rc));
      goto out_settings_error;
    }
  }
  if (self->status_topic != NULL) {
    /* the broker publishes it for us when the connection dies */
    rc = mosquitto_will_set (self->mosq, self->status_topic,
        strlen (STATUS_OFFLINE), STATUS_OFFLINE, self->active_qos, true);
    if (rc != MOSQ_ERR_SUCCESS) {
      error_message = g_strdup_printf ("status topic: %s",
          mosquitto_strerror (rc));
      goto out_settings_error;
    }
    self->status_online = g_bytes_new_static (STATUS_ONLINE,
        strlen (STATUS_ONLINE));
  }

  g_mutex_lock (&self->lock);
  self->stopping = FALSE;
  self->flushing = FALSE;
  self->fatal = FALSE;
  self->outage = FALSE;
  self->drop_warned = FALSE;
  self->published = 0;
  self->dropped = 0;
  self->epoch = 0;
  g_mutex_unlock (&self->lock);
  self->frame_count = 0;

  {
    GError *error = NULL;

    self->network_thread = g_thread_try_new ("visionmqtt",
        gst_vision_mqtt_network_thread, self, &error);
    if (self->network_thread == NULL) {
      GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
          ("Could not start the MQTT network thread: %s", error->message),
          (NULL));
      g_error_free (error);
      goto out;
    }
  }
  GST_INFO_OBJECT (self, "publishing to %s, topic \"%s\", QoS %d",
      self->broker, self->topic, self->active_qos);
  ok = TRUE;
  goto out;

out_settings_error:
  GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS,
      ("Invalid MQTT settings: %s", error_message), (NULL));
out:
  if (!ok)
    clear_session (self);
  g_free (error_message);
  g_free (element_name);
  g_free (host);
  g_free (topic_template);
  g_free (source_id);
  g_free (status_template);
  g_free (client_id);
  g_free (username);
  if (password != NULL)
    memset (password, 0, strlen (password));
  g_free (password);
  g_free (cafile);
  g_free (certfile);
  g_free (keyfile);
  return ok;
}

static gboolean
gst_vision_mqtt_stop (GstBaseTransform * trans)
{
  GstVisionMqtt *self = GST_VISION_MQTT (trans);
  gboolean connected;
  gint64 deadline;
  gint status_mid = -1;

  if (self->mosq == NULL)
    return TRUE;

  g_mutex_lock (&self->lock);
  self->stopping = TRUE;
  connected = self->connected;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);

  /* a clean stop is no outage: the status says offline, and the DISCONNECT
   * tells the broker not to publish the will */
  if (connected && self->status_topic != NULL
      && mosquitto_publish (self->mosq, &status_mid, self->status_topic,
          strlen (STATUS_OFFLINE), STATUS_OFFLINE, self->active_qos,
          true) == MOSQ_ERR_SUCCESS) {
    g_mutex_lock (&self->lock);
    if (!g_hash_table_remove (self->early_acks, GINT_TO_POINTER (status_mid)))
      g_hash_table_add (self->status_mids, GINT_TO_POINTER (status_mid));
    g_mutex_unlock (&self->lock);
  }
  /* Acknowledgements still to come would reach a socket libmosquitto closes
   * as soon as the DISCONNECT is written: the reset that answers them makes
   * the broker drop the connection as lost, before it reads the DISCONNECT,
   * and publish the will. So wait for them first, a little. */
  deadline = g_get_monotonic_time () + STOP_ACK_WAIT_US;
  g_mutex_lock (&self->lock);
  while (self->connected && (g_hash_table_size (self->status_mids) > 0
          || self->n_in_flight > 0))
    if (!g_cond_wait_until (&self->cond, &self->lock, deadline))
      break;
  g_mutex_unlock (&self->lock);
  mosquitto_disconnect (self->mosq);
  g_thread_join (self->network_thread);
  self->network_thread = NULL;

  GST_INFO_OBJECT (self, "stopped: %" G_GUINT64_FORMAT " published, %"
      G_GUINT64_FORMAT " dropped", self->published, self->dropped);
  clear_session (self);
  self->have_info = FALSE;
  return TRUE;
}

static GstStateChangeReturn
gst_vision_mqtt_change_state (GstElement * element, GstStateChange transition)
{
  GstVisionMqtt *self = GST_VISION_MQTT (element);

  /* an EOS waiting for the queue must not hold the stream lock that
   * deactivating the pads takes */
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    g_mutex_lock (&self->lock);
    self->flushing = TRUE;
    g_cond_broadcast (&self->cond);
    g_mutex_unlock (&self->lock);
  }
  return GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
}

static void
set_string (gchar ** field, const GValue * value)
{
  g_free (*field);
  *field = g_value_dup_string (value);
}

static void
gst_vision_mqtt_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstVisionMqtt *self = GST_VISION_MQTT (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_HOST:
      set_string (&self->host, value);
      break;
    case PROP_PORT:
      self->port = g_value_get_int (value);
      break;
    case PROP_TOPIC:
      set_string (&self->topic_template, value);
      break;
    case PROP_SOURCE_ID:
      set_string (&self->source_id, value);
      break;
    case PROP_STATUS_TOPIC:
      set_string (&self->status_topic_template, value);
      break;
    case PROP_QOS:
      self->qos = g_value_get_uint (value);
      break;
    case PROP_CLIENT_ID:
      set_string (&self->client_id, value);
      break;
    case PROP_USERNAME:
      set_string (&self->username, value);
      break;
    case PROP_PASSWORD:
      if (self->password != NULL)
        memset (self->password, 0, strlen (self->password));
      set_string (&self->password, value);
      break;
    case PROP_CAFILE:
      set_string (&self->cafile, value);
      break;
    case PROP_CERTFILE:
      set_string (&self->certfile, value);
      break;
    case PROP_KEYFILE:
      set_string (&self->keyfile, value);
      break;
    case PROP_KEEPALIVE:
      self->keepalive = g_value_get_uint (value);
      break;
    case PROP_MAX_QUEUE:
      self->max_queue = g_value_get_uint (value);
      break;
    case PROP_MAX_INFLIGHT:
      self->max_inflight = g_value_get_uint (value);
      break;
    case PROP_FLUSH_TIMEOUT:
      self->flush_timeout = g_value_get_uint (value);
      break;
    case PROP_RECONNECT_DELAY_MAX:
      self->reconnect_delay_max = g_value_get_uint (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_mqtt_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstVisionMqtt *self = GST_VISION_MQTT (object);

  switch (prop_id) {
    case PROP_CONNECTED:
      g_mutex_lock (&self->lock);
      g_value_set_boolean (value, self->connected);
      g_mutex_unlock (&self->lock);
      return;
    case PROP_PUBLISHED:
      g_mutex_lock (&self->lock);
      g_value_set_uint64 (value, self->published);
      g_mutex_unlock (&self->lock);
      return;
    case PROP_DROPPED:
      g_mutex_lock (&self->lock);
      g_value_set_uint64 (value, self->dropped);
      g_mutex_unlock (&self->lock);
      return;
    default:
      break;
  }

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_HOST:
      g_value_set_string (value, self->host);
      break;
    case PROP_PORT:
      g_value_set_int (value, self->port);
      break;
    case PROP_TOPIC:
      g_value_set_string (value, self->topic_template);
      break;
    case PROP_SOURCE_ID:
      g_value_set_string (value, self->source_id);
      break;
    case PROP_STATUS_TOPIC:
      g_value_set_string (value, self->status_topic_template);
      break;
    case PROP_QOS:
      g_value_set_uint (value, self->qos);
      break;
    case PROP_CLIENT_ID:
      g_value_set_string (value, self->client_id);
      break;
    case PROP_USERNAME:
      g_value_set_string (value, self->username);
      break;
    case PROP_CAFILE:
      g_value_set_string (value, self->cafile);
      break;
    case PROP_CERTFILE:
      g_value_set_string (value, self->certfile);
      break;
    case PROP_KEYFILE:
      g_value_set_string (value, self->keyfile);
      break;
    case PROP_KEEPALIVE:
      g_value_set_uint (value, self->keepalive);
      break;
    case PROP_MAX_QUEUE:
      g_value_set_uint (value, self->max_queue);
      break;
    case PROP_MAX_INFLIGHT:
      g_value_set_uint (value, self->max_inflight);
      break;
    case PROP_FLUSH_TIMEOUT:
      g_value_set_uint (value, self->flush_timeout);
      break;
    case PROP_RECONNECT_DELAY_MAX:
      g_value_set_uint (value, self->reconnect_delay_max);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_vision_mqtt_finalize (GObject * object)
{
  GstVisionMqtt *self = GST_VISION_MQTT (object);

  g_free (self->host);
  g_free (self->topic_template);
  g_free (self->source_id);
  g_free (self->status_topic_template);
  g_free (self->client_id);
  g_free (self->username);
  if (self->password != NULL)
    memset (self->password, 0, strlen (self->password));
  g_free (self->password);
  g_free (self->cafile);
  g_free (self->certfile);
  g_free (self->keyfile);
  g_hash_table_unref (self->in_flight);
  g_hash_table_unref (self->early_acks);
  g_hash_table_unref (self->status_mids);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

#define READY_STRING(name, nick, blurb, def) \
  g_param_spec_string (name, nick, blurb, def, G_PARAM_READWRITE \
      | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY)

static void
gst_vision_mqtt_class_init (GstVisionMqttClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseTransformClass *trans_class = GST_BASE_TRANSFORM_CLASS (klass);
  const GParamFlags ready = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
      | GST_PARAM_MUTABLE_READY;
  const GParamFlags counter = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  gobject_class->set_property = gst_vision_mqtt_set_property;
  gobject_class->get_property = gst_vision_mqtt_get_property;
  gobject_class->finalize = gst_vision_mqtt_finalize;

  g_object_class_install_property (gobject_class, PROP_HOST,
      READY_STRING ("host", "Host", "MQTT broker host name or address",
          DEFAULT_HOST));
  g_object_class_install_property (gobject_class, PROP_PORT,
      g_param_spec_int ("port", "Port", "MQTT broker port (8883 is the usual "
          "one for TLS)", 1, 65535, DEFAULT_PORT, ready));
  g_object_class_install_property (gobject_class, PROP_TOPIC,
      READY_STRING ("topic", "Topic", "Topic of the detection messages; "
          "{element} (this element's name), {source-id} and {hostname} are "
          "replaced", DEFAULT_TOPIC));
  g_object_class_install_property (gobject_class, PROP_SOURCE_ID,
      READY_STRING ("source-id", "Source id", "Name of this video source in "
          "the topic's {source-id} (a camera name, say); unset: the element's "
          "name", NULL));
  g_object_class_install_property (gobject_class, PROP_STATUS_TOPIC,
      READY_STRING ("status-topic", "Status topic", "Topic of a retained "
          "{\"status\":\"online\"} on connection and {\"status\":\"offline\"} "
          "on stop or, as the last will, when the connection dies; the same "
          "placeholders as topic; unset: no status", NULL));
  g_object_class_install_property (gobject_class, PROP_QOS,
      g_param_spec_uint ("qos", "QoS", "MQTT quality of service: 0 (at most "
          "once) or 1 (at least once, counted published when the broker "
          "acknowledges)", 0, 1, DEFAULT_QOS, ready));
  g_object_class_install_property (gobject_class, PROP_CLIENT_ID,
      READY_STRING ("client-id", "Client id", "MQTT client identifier; "
          "unset: the broker assigns one", NULL));
  g_object_class_install_property (gobject_class, PROP_USERNAME,
      READY_STRING ("username", "Username", "User name for the broker", NULL));
  g_object_class_install_property (gobject_class, PROP_PASSWORD,
      g_param_spec_string ("password", "Password", "Password for the broker "
          "(write-only)", NULL, G_PARAM_WRITABLE | G_PARAM_STATIC_STRINGS
          | GST_PARAM_MUTABLE_READY));
  g_object_class_install_property (gobject_class, PROP_CAFILE,
      READY_STRING ("cafile", "CA file", "PEM file of the certificate "
          "authorities that signed the broker's certificate: set, the "
          "connection uses TLS and checks the broker's certificate and host "
          "name", NULL));
  g_object_class_install_property (gobject_class, PROP_CERTFILE,
      READY_STRING ("certfile", "Certificate file", "PEM client certificate, "
          "for brokers that authenticate clients by certificate (with "
          "keyfile and cafile)", NULL));
  g_object_class_install_property (gobject_class, PROP_KEYFILE,
      READY_STRING ("keyfile", "Key file", "PEM private key of certfile (not "
          "encrypted)", NULL));
  g_object_class_install_property (gobject_class, PROP_KEEPALIVE,
      g_param_spec_uint ("keepalive", "Keepalive", "Seconds between keepalive "
          "pings when idle; a broker that does not answer a ping within "
          "as long is taken as away", 5, 65535, DEFAULT_KEEPALIVE, ready));
  g_object_class_install_property (gobject_class, PROP_MAX_QUEUE,
      g_param_spec_uint ("max-queue", "Maximum queue", "Messages waiting for "
          "the broker at most; beyond, the oldest is dropped", 1,
          G_MAXINT, DEFAULT_MAX_QUEUE, ready));
  g_object_class_install_property (gobject_class, PROP_MAX_INFLIGHT,
      g_param_spec_uint ("max-inflight", "Maximum in flight", "Messages handed "
          "to the connection and not yet written (QoS 0) or "
          "acknowledged (QoS 1) at most", 1, 65534, DEFAULT_MAX_INFLIGHT,
          ready));
  g_object_class_install_property (gobject_class, PROP_FLUSH_TIMEOUT,
      g_param_spec_uint ("flush-timeout", "Flush timeout", "Milliseconds EOS "
          "waits at most for the queued messages to be published", 0,
          G_MAXUINT, DEFAULT_FLUSH_TIMEOUT, G_PARAM_READWRITE
          | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));
  g_object_class_install_property (gobject_class, PROP_RECONNECT_DELAY_MAX,
      g_param_spec_uint ("reconnect-delay-max", "Maximum reconnect delay",
          "Seconds between reconnection attempts at most (the delay starts "
          "at 0.25 s and doubles)", 1, 3600, DEFAULT_RECONNECT_DELAY_MAX,
          ready));
  g_object_class_install_property (gobject_class, PROP_CONNECTED,
      g_param_spec_boolean ("connected", "Connected", "Whether the broker "
          "accepted the connection and it is up", FALSE, counter));
  g_object_class_install_property (gobject_class, PROP_PUBLISHED,
      g_param_spec_uint64 ("published", "Published", "Messages written to the "
          "connection (QoS 0) or acknowledged by the broker (QoS 1) since "
          "the element started", 0, G_MAXUINT64, 0, counter));
  g_object_class_install_property (gobject_class, PROP_DROPPED,
      g_param_spec_uint64 ("dropped", "Dropped", "Messages discarded since the "
          "element started: the oldest of a full queue, QoS 0 ones lost with "
          "a connection, and those still unpublished when it stopped", 0,
          G_MAXUINT64, 0, counter));

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "Vision detections to MQTT", "Filter/Analyzer/Video/Network",
      "Publishes each frame's detections as JSON (visionjson's line) to an "
      "MQTT broker", "visiondetect developers");

  element_class->change_state =
      GST_DEBUG_FUNCPTR (gst_vision_mqtt_change_state);
  trans_class->start = GST_DEBUG_FUNCPTR (gst_vision_mqtt_start);
  trans_class->stop = GST_DEBUG_FUNCPTR (gst_vision_mqtt_stop);
  trans_class->set_caps = GST_DEBUG_FUNCPTR (gst_vision_mqtt_set_caps);
  trans_class->sink_event = GST_DEBUG_FUNCPTR (gst_vision_mqtt_sink_event);
  trans_class->transform_ip = GST_DEBUG_FUNCPTR (gst_vision_mqtt_transform_ip);
  trans_class->transform_ip_on_passthrough = TRUE;

  GST_DEBUG_CATEGORY_INIT (gst_vision_mqtt_debug, "visionmqtt", 0,
      "visiondetect MQTT publisher");
}

static void
gst_vision_mqtt_init (GstVisionMqtt * self)
{
  self->host = g_strdup (DEFAULT_HOST);
  self->port = DEFAULT_PORT;
  self->topic_template = g_strdup (DEFAULT_TOPIC);
  self->qos = DEFAULT_QOS;
  self->keepalive = DEFAULT_KEEPALIVE;
  self->max_queue = DEFAULT_MAX_QUEUE;
  self->max_inflight = DEFAULT_MAX_INFLIGHT;
  self->flush_timeout = DEFAULT_FLUSH_TIMEOUT;
  self->reconnect_delay_max = DEFAULT_RECONNECT_DELAY_MAX;
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->queue);
  self->in_flight = g_hash_table_new (NULL, NULL);
  self->early_acks = g_hash_table_new (NULL, NULL);
  self->status_mids = g_hash_table_new (NULL, NULL);
  gst_base_transform_set_passthrough (GST_BASE_TRANSFORM (self), TRUE);
}
