/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* visionmqtt against Debian's mosquitto broker, started by the test on a free
 * loopback port with a generated configuration: messages equal visionjson's
 * lines and arrive in order (QoS 0 and 1), a broker restart loses exactly the
 * messages the element counts dropped, a server that answers junk is retried,
 * wrong credentials and an untrusted TLS certificate are element errors, TLS
 * with a generated CA works, settings errors fail the start. The subscriber is a libmosquitto client of the test
 * itself. Skipped (77) when the mosquitto broker is not installed. */
#include "vdtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <mosquitto.h>

#define WIDTH 320
#define HEIGHT 240

static const gchar *caps = "video/x-raw,format=RGB,width=320,height=240,"
    "framerate=25/1";
static gchar *mosquitto_path;

/* ---- the broker ---------------------------------------------------------- */

typedef struct
{
  gchar *dir;
  gint port;                    /* the element's listener */
  gint plain_port;              /* a plain one for the test's subscriber, or 0 */
  gchar *extra_config;          /* global options */
  gchar *listener_options;      /* options of the element's listener (TLS) */
  GSubprocess *process;
} Broker;

static gint
free_port (void)
{
  struct sockaddr_in address;
  socklen_t length = sizeof (address);
  int fd = socket (AF_INET, SOCK_STREAM, 0);

  fail_unless (fd >= 0);
  memset (&address, 0, sizeof (address));
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  fail_unless (bind (fd, (struct sockaddr *) &address, sizeof (address)) == 0);
  fail_unless (getsockname (fd, (struct sockaddr *) &address, &length) == 0);
  close (fd);
  return ntohs (address.sin_port);
}

static gboolean
port_accepts (gint port)
{
  struct sockaddr_in address;
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  gboolean ok;

  memset (&address, 0, sizeof (address));
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  address.sin_port = htons (port);
  ok = connect (fd, (struct sockaddr *) &address, sizeof (address)) == 0;
  close (fd);
  return ok;
}

/* the broker dies with the test process, even when a check fails */
static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static Broker *
broker_new (const gchar * extra_config)
{
  Broker *b = g_new0 (Broker, 1);

  b->dir = g_dir_make_tmp ("vdtest-mqtt-XXXXXX", NULL);
  fail_unless (b->dir != NULL);
  b->port = free_port ();
  b->extra_config = g_strdup (extra_config ? extra_config : "");
  return b;
}

static gchar *
broker_file (Broker * b, const gchar * name)
{
  return g_build_filename (b->dir, name, NULL);
}

static void
broker_start (Broker * b)
{
  gchar *config_path = broker_file (b, "mosquitto.conf");
  gchar *log_path = broker_file (b, "broker.log");
  GString *config = g_string_new (NULL);
  GSubprocessLauncher *launcher;
  GError *error = NULL;
  gint64 deadline;

  /* as root, mosquitto would drop to the user "mosquitto", which cannot read
   * the test's files */
  g_string_append_printf (config, "user %s\nallow_anonymous true\n"
      "persistence true\npersistence_location %s/\n%s\n"
      "listener %d 127.0.0.1\n%s\n", g_get_user_name (), b->dir,
      b->extra_config, b->port,
      b->listener_options ? b->listener_options : "");
  if (b->plain_port)
    g_string_append_printf (config, "listener %d 127.0.0.1\n", b->plain_port);
  fail_unless (g_file_set_contents (config_path, config->str, -1, NULL));

  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_subprocess_launcher_set_child_setup (launcher, die_with_parent, NULL,
      NULL);
  g_subprocess_launcher_set_stderr_file_path (launcher, log_path);
  b->process = g_subprocess_launcher_spawn (launcher, &error, mosquitto_path,
      "-c", config_path, NULL);
  fail_unless (b->process != NULL, "cannot start mosquitto: %s",
      error ? error->message : "");
  g_object_unref (launcher);

  deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (!port_accepts (b->port) || (b->plain_port
          && !port_accepts (b->plain_port))) {
    gchar *log = NULL;

    g_file_get_contents (log_path, &log, NULL, NULL);
    fail_if (g_subprocess_get_identifier (b->process) == NULL
        || g_get_monotonic_time () > deadline,
        "mosquitto did not start listening: %s", log ? log : "");
    g_free (log);
    g_usleep (10 * 1000);
  }
  g_string_free (config, TRUE);
  g_free (config_path);
  g_free (log_path);
}

/* SIGTERM: the broker closes its connections and saves its persistence */
static void
broker_stop (Broker * b)
{
  if (b->process == NULL)
    return;
  g_subprocess_send_signal (b->process, SIGTERM);
  fail_unless (g_subprocess_wait (b->process, NULL, NULL));
  g_clear_object (&b->process);
}

static void
broker_free (Broker * b)
{
  gchar *command;

  broker_stop (b);
  command = g_strdup_printf ("rm -rf '%s'", b->dir);
  fail_unless (system (command) == 0);
  g_free (command);
  g_free (b->extra_config);
  g_free (b->listener_options);
  g_free (b->dir);
  g_free (b);
}

/* SIGSTOP, and wait until the kernel has stopped it (kill() does not) */
static void
broker_freeze (Broker * b)
{
  const gchar *pid = g_subprocess_get_identifier (b->process);
  gchar *stat_path = g_strdup_printf ("/proc/%s/stat", pid);
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  g_subprocess_send_signal (b->process, SIGSTOP);
  for (;;) {
    gchar *stat = NULL, *state;
    gboolean stopped;

    fail_unless (g_file_get_contents (stat_path, &stat, NULL, NULL));
    /* "pid (comm) S ...": the state follows the last ')' */
    state = strrchr (stat, ')');
    stopped = state != NULL && state[1] == ' ' && state[2] == 'T';
    g_free (stat);
    if (stopped)
      break;
    fail_unless (g_get_monotonic_time () < deadline, "mosquitto not stopped");
    g_usleep (1000);
  }
  g_free (stat_path);
}

static void
run_tool (const gchar * const *argv)
{
  gchar *err = NULL;
  gint status = -1;
  GError *error = NULL;

  fail_unless (g_spawn_sync (NULL, (gchar **) argv, NULL,
          G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
          &err, &status, &error), "cannot run %s: %s", argv[0],
      error ? error->message : "");
  fail_unless (g_spawn_check_wait_status (status, NULL), "%s failed: %s",
      argv[0], err);
  g_free (err);
}

/* ---- the subscriber ------------------------------------------------------ */

typedef struct
{
  struct mosquitto *mosq;
  gchar *filter;
  GMutex lock;
  GCond cond;
  gboolean subscribed;
  GPtrArray *topics;
  GPtrArray *payloads;
} Subscriber;

static void
sub_on_connect (struct mosquitto *mosq, void *user_data, int rc)
{
  Subscriber *s = user_data;

  if (rc == 0)
    mosquitto_subscribe (mosq, NULL, s->filter, 1);
}

static void
sub_on_subscribe (struct mosquitto *mosq, void *user_data, int mid,
    int qos_count, const int *granted_qos)
{
  Subscriber *s = user_data;

  g_mutex_lock (&s->lock);
  s->subscribed = TRUE;
  g_cond_broadcast (&s->cond);
  g_mutex_unlock (&s->lock);
}

static void
sub_on_message (struct mosquitto *mosq, void *user_data,
    const struct mosquitto_message *message)
{
  Subscriber *s = user_data;

  g_mutex_lock (&s->lock);
  g_ptr_array_add (s->topics, g_strdup (message->topic));
  g_ptr_array_add (s->payloads, g_strndup (message->payload,
          message->payloadlen));
  g_cond_broadcast (&s->cond);
  g_mutex_unlock (&s->lock);
}

/* Subscribes to @filter at QoS 1 on 127.0.0.1:@port; with @client_id, in a
 * persistent session (the broker keeps its messages while it is away). */
static Subscriber *
subscriber_new (gint port, const gchar * filter, const gchar * client_id)
{
  Subscriber *s = g_new0 (Subscriber, 1);
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  g_mutex_init (&s->lock);
  g_cond_init (&s->cond);
  s->filter = g_strdup (filter);
  s->topics = g_ptr_array_new_with_free_func (g_free);
  s->payloads = g_ptr_array_new_with_free_func (g_free);
  s->mosq = mosquitto_new (client_id, client_id == NULL, s);
  fail_unless (s->mosq != NULL);
  mosquitto_connect_callback_set (s->mosq, sub_on_connect);
  mosquitto_subscribe_callback_set (s->mosq, sub_on_subscribe);
  mosquitto_message_callback_set (s->mosq, sub_on_message);
  mosquitto_reconnect_delay_set (s->mosq, 1, 1, false);
  fail_unless_equals_int (mosquitto_connect (s->mosq, "127.0.0.1", port, 60),
      MOSQ_ERR_SUCCESS);
  fail_unless_equals_int (mosquitto_loop_start (s->mosq), MOSQ_ERR_SUCCESS);
  g_mutex_lock (&s->lock);
  while (!s->subscribed)
    fail_unless (g_cond_wait_until (&s->cond, &s->lock, deadline),
        "no SUBACK in 5 s");
  g_mutex_unlock (&s->lock);
  return s;
}

static void
subscriber_free (Subscriber * s)
{
  mosquitto_disconnect (s->mosq);
  mosquitto_loop_stop (s->mosq, false);
  mosquitto_destroy (s->mosq);
  g_ptr_array_unref (s->topics);
  g_ptr_array_unref (s->payloads);
  g_free (s->filter);
  g_mutex_clear (&s->lock);
  g_cond_clear (&s->cond);
  g_free (s);
}

/* The payloads received on @topic so far (a new array of copies). */
static GPtrArray *
subscriber_messages (Subscriber * s, const gchar * topic)
{
  GPtrArray *result = g_ptr_array_new_with_free_func (g_free);
  guint i;

  g_mutex_lock (&s->lock);
  for (i = 0; i < s->topics->len; i++)
    if (strcmp (g_ptr_array_index (s->topics, i), topic) == 0)
      g_ptr_array_add (result, g_strdup (g_ptr_array_index (s->payloads, i)));
  g_mutex_unlock (&s->lock);
  return result;
}

static guint64
payload_frame (const gchar * payload)
{
  guint64 frame;

  fail_unless (sscanf (payload, "{\"frame\":%" G_GUINT64_FORMAT, &frame) == 1,
      "not a frame: %s", payload);
  return frame;
}

/* Distinct frame numbers received on @topic, in the order they first came
 * (QoS 1 may deliver a message twice after a reconnection). */
static GArray *
subscriber_frames (Subscriber * s, const gchar * topic)
{
  GPtrArray *messages = subscriber_messages (s, topic);
  GHashTable *seen = g_hash_table_new (NULL, NULL);
  GArray *frames = g_array_new (FALSE, FALSE, sizeof (guint64));
  guint i;

  for (i = 0; i < messages->len; i++) {
    guint64 frame = payload_frame (g_ptr_array_index (messages, i));

    /* the test's frame numbers fit in a pointer */
    if (g_hash_table_add (seen, GSIZE_TO_POINTER (frame)))
      g_array_append_val (frames, frame);
  }
  g_hash_table_unref (seen);
  g_ptr_array_unref (messages);
  return frames;
}

/* Waits until @n distinct frames numbered @first or more have arrived. */
static void
subscriber_wait_frames_from (Subscriber * s, const gchar * topic,
    guint64 first, guint n)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  for (;;) {
    GArray *frames = subscriber_frames (s, topic);
    guint have = 0, i;

    for (i = 0; i < frames->len; i++)
      if (g_array_index (frames, guint64, i) >= first)
        have++;
    g_array_unref (frames);
    if (have >= n)
      return;
    fail_unless (g_get_monotonic_time () < deadline,
        "only %u of %u frames arrived on %s in 10 s", have, n, topic);
    g_usleep (10 * 1000);
  }
}

static void
subscriber_wait_frames (Subscriber * s, const gchar * topic, guint n)
{
  subscriber_wait_frames_from (s, topic, 0, n);
}

/* ---- the element --------------------------------------------------------- */

/* Frame @index with a few detections that change from frame to frame (and
 * none on every fifth). */
static GstBuffer *
new_frame (guint index)
{
  GstVideoInfo info;
  GstBuffer *buffer;
  guint i;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, WIDTH, HEIGHT);
  buffer = gst_buffer_new_allocate (NULL, GST_VIDEO_INFO_SIZE (&info), NULL);
  GST_BUFFER_PTS (buffer) = index * 40 * GST_MSECOND;
  if (index % 5 != 4) {
    GstVisionDetectMeta *meta = vdtest_add_detect_meta (buffer, WIDTH, HEIGHT);

    for (i = 0; i < 1 + index % 3; i++)
      vdtest_add_detection (meta, 3.25 * index + 10 * i, 7.5 + i, 40.125,
          30.0 + index % 7, 0.99 - 0.01 * i - 0.001 * index, 1 + i % 2,
          i % 2 ? "box" : "ball", i);
  }
  return buffer;
}

static guint64
get_counter (GstElement * e, const gchar * name)
{
  guint64 value;

  g_object_get (e, name, &value, NULL);
  return value;
}

static gboolean
get_connected (GstElement * e)
{
  gboolean value;

  g_object_get (e, "connected", &value, NULL);
  return value;
}

static void
wait_for (GstElement * e, const gchar * what, gboolean (*done) (GstElement *,
        gpointer), gpointer data)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  while (!done (e, data)) {
    fail_unless (g_get_monotonic_time () < deadline, "timed out waiting %s",
        what);
    g_usleep (5 * 1000);
  }
}

static gboolean
is_connected (GstElement * e, gpointer data)
{
  return get_connected (e) == GPOINTER_TO_INT (data);
}

static gboolean
published_at_least (GstElement * e, gpointer data)
{
  return get_counter (e, "published") >= GPOINTER_TO_UINT (data);
}

static void
push_frames (GstHarness * h, guint first, guint n)
{
  guint i;

  for (i = first; i < first + n; i++) {
    GstBuffer *out;

    fail_unless_equals_int (gst_harness_push (h, new_frame (i)), GST_FLOW_OK);
    out = gst_harness_pull (h);
    fail_unless (out != NULL);
    gst_buffer_unref (out);
  }
}

/* The text of @msg, an error, warning or info message, which it unrefs. */
static gchar *
take_text (GstMessage * msg)
{
  GError *error = NULL;
  gchar *text;

  if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_WARNING)
    gst_message_parse_warning (msg, &error, NULL);
  else if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR)
    gst_message_parse_error (msg, &error, NULL);
  else
    gst_message_parse_info (msg, &error, NULL);
  text = g_strdup (error->message);
  g_error_free (error);
  gst_message_unref (msg);
  return text;
}

/* The bus messages of @type whose text contains @needle. */
static guint
count_messages (GstBus * bus, GstMessageType type, const gchar * needle)
{
  GstMessage *msg;
  guint n = 0;

  while ((msg = gst_bus_pop_filtered (bus, type)) != NULL) {
    gchar *text = take_text (msg);

    if (strstr (text, needle) != NULL)
      n++;
    g_free (text);
  }
  return n;
}

/* Waits up to 10 s for a message of @type whose text contains @needle,
 * then takes the rest of that type from @bus: the texts of all the messages
 * taken, in order, for counting with count_texts(). For messages that
 * another thread posts (the network thread reports a lost connection a
 * little after #GstVisionMqtt:connected turns FALSE). */
static GPtrArray *
wait_messages (GstBus * bus, GstMessageType type, const gchar * needle)
{
  GPtrArray *texts = g_ptr_array_new_with_free_func (g_free);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  gboolean found = FALSE;

  for (;;) {
    GstClockTime timeout = 0;
    GstMessage *msg;
    gchar *text;

    if (!found) {
      gint64 left = deadline - g_get_monotonic_time ();

      if (left <= 0)
        break;
      timeout = left * GST_USECOND;
    }
    msg = gst_bus_timed_pop_filtered (bus, timeout, type);
    if (msg == NULL)
      break;
    text = take_text (msg);
    if (strstr (text, needle) != NULL)
      found = TRUE;
    g_ptr_array_add (texts, text);
  }
  return texts;
}

/* How many of @texts contain @needle. */
static guint
count_texts (GPtrArray * texts, const gchar * needle)
{
  guint i, n = 0;

  for (i = 0; i < texts->len; i++)
    if (strstr (g_ptr_array_index (texts, i), needle) != NULL)
      n++;
  return n;
}

/* Fails on any warning or error on @bus (the element alone posts its state
 * changes there too). */
static void
check_no_problems (GstBus * bus)
{
  GstMessage *msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR
      | GST_MESSAGE_WARNING);

  if (msg != NULL) {
    GError *error = NULL;

    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR)
      gst_message_parse_error (msg, &error, NULL);
    else
      gst_message_parse_warning (msg, &error, NULL);
    fail ("unexpected %s: %s", GST_MESSAGE_TYPE_NAME (msg), error->message);
  }
}

/* Waits for an error message on @bus and returns it (domain and text). */
static GError *
wait_error (GstBus * bus)
{
  GstMessage *msg = gst_bus_timed_pop_filtered (bus, 10 * GST_SECOND,
      GST_MESSAGE_ERROR);
  GError *error = NULL;

  fail_unless (msg != NULL, "no error in 10 s");
  gst_message_parse_error (msg, &error, NULL);
  gst_message_unref (msg);
  return error;
}

/* A harness around the single element of @launch, with @bus set before it
 * starts (its first messages come from its network thread, at once). Returns
 * a reference to the element in @element. */
static GstHarness *
mqtt_harness (const gchar * launch, GstBus * bus, GstElement ** element)
{
  GError *error = NULL;
  GstElement *e = gst_parse_launch (launch, &error);

  fail_unless (e != NULL, "cannot parse %s: %s", launch,
      error ? error->message : "");
  gst_object_ref_sink (e);
  gst_element_set_bus (e, bus);
  *element = e;
  return gst_harness_new_with_element (e, "sink", "src");
}

static void
push_eos (GstHarness * h)
{
  fail_unless (gst_harness_push_event (h, gst_event_new_eos ()));
}

/* ---- the tests ----------------------------------------------------------- */

/* (a) N frames: every message arrives once, in order, on the expanded topic,
 * byte for byte visionjson's line of the same frame; published counts them
 * all at EOS; the status topic says online, then offline on stop. */
static void
check_messages_match_visionjson (guint qos)
{
  const guint n_frames = 40;
  Broker *b = broker_new (NULL);
  Subscriber *s;
  gchar *jsonl = broker_file (b, "frames.jsonl");
  gchar *launch, *contents, **lines, *topic, *status_topic;
  GstHarness *h;
  GstElement *mqtt;
  GPtrArray *messages, *status;
  guint i;

  broker_start (b);
  s = subscriber_new (b->port, "vdtest/#", NULL);
  launch = g_strdup_printf ("visionjson location=\"%s\" ! visionmqtt "
      "name=pub0 port=%d qos=%u source-id=cam-a "
      "topic=vdtest/{source-id}/{element}/{hostname}/detections "
      "status-topic=vdtest/{source-id}/status", jsonl, b->port, qos);
  h = gst_harness_new_parse (launch);
  mqtt = gst_harness_find_element (h, "visionmqtt");
  gst_harness_set_src_caps_str (h, caps);
  wait_for (mqtt, "for the connection", is_connected, GINT_TO_POINTER (TRUE));

  push_frames (h, 0, n_frames);
  push_eos (h);
  /* EOS waits for the queue */
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), n_frames);
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 0);
  gst_object_unref (mqtt);
  gst_harness_teardown (h);

  topic = g_strdup_printf ("vdtest/cam-a/pub0/%s/detections",
      g_get_host_name ());
  status_topic = g_strdup ("vdtest/cam-a/status");
  subscriber_wait_frames (s, topic, n_frames);
  fail_unless (g_file_get_contents (jsonl, &contents, NULL, NULL));
  lines = g_strsplit (contents, "\n", -1);
  fail_unless_equals_int (g_strv_length (lines), n_frames + 1);
  messages = subscriber_messages (s, topic);
  fail_unless_equals_int (messages->len, n_frames);
  for (i = 0; i < n_frames; i++)
    fail_unless_equals_string (g_ptr_array_index (messages, i), lines[i]);

  /* online when connected, offline on the clean stop (and the will unused) */
  {
    gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

    do {
      status = subscriber_messages (s, status_topic);
      if (status->len >= 2 || g_get_monotonic_time () > deadline)
        break;
      g_ptr_array_unref (status);
      g_usleep (10 * 1000);
    } while (TRUE);
  }
  fail_unless (status->len == 2, "%u status messages: %s, %s, %s",
      status->len, (gchar *) g_ptr_array_index (status, 0),
      status->len > 1 ? (gchar *) g_ptr_array_index (status, 1) : "",
      status->len > 2 ? (gchar *) g_ptr_array_index (status, 2) : "");
  fail_unless_equals_string (g_ptr_array_index (status, 0),
      "{\"status\":\"online\"}");
  fail_unless_equals_string (g_ptr_array_index (status, 1),
      "{\"status\":\"offline\"}");

  g_ptr_array_unref (status);
  g_ptr_array_unref (messages);
  g_strfreev (lines);
  g_free (contents);
  g_free (topic);
  g_free (status_topic);
  g_free (launch);
  g_free (jsonl);
  subscriber_free (s);
  broker_free (b);
}

/* A flushing seek (FLUSH_START, FLUSH_STOP, a segment from 80 ms): `frame`
 * starts at 0 again, as visionjson's; a frame before the segment (pts 0)
 * is not published. Expected frames: 0, 1, 2, then 0, 1 for pts 80, 120 ms. */
GST_START_TEST (test_flush_restarts_frame)
{
  Broker *b = broker_new (NULL);
  Subscriber *s;
  gchar *launch;
  GstHarness *h;
  GstElement *mqtt;
  GstSegment segment;
  GPtrArray *messages;
  const guint64 frames[] = { 0, 1, 2, 0, 1 };
  const guint64 pts_ms[] = { 0, 40, 80, 80, 120 };
  guint i;

  broker_start (b);
  s = subscriber_new (b->port, "vdtest/#", NULL);
  launch = g_strdup_printf ("visionmqtt port=%d qos=1 topic=vdtest/flush",
      b->port);
  h = gst_harness_new_parse (launch);
  mqtt = gst_harness_find_element (h, "visionmqtt");
  gst_harness_set_src_caps_str (h, caps);
  wait_for (mqtt, "for the connection", is_connected, GINT_TO_POINTER (TRUE));

  push_frames (h, 0, 3);
  wait_for (mqtt, "for 3 frames published", published_at_least,
      GUINT_TO_POINTER (3));
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_start ()));
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  gst_segment_init (&segment, GST_FORMAT_TIME);
  segment.start = segment.time = segment.position = 80 * GST_MSECOND;
  fail_unless (gst_harness_push_event (h, gst_event_new_segment (&segment)));
  push_frames (h, 0, 1);
  push_frames (h, 2, 2);
  push_eos (h);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 5);
  gst_object_unref (mqtt);
  gst_harness_teardown (h);

  {
    gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

    for (;;) {
      messages = subscriber_messages (s, "vdtest/flush");
      if (messages->len >= 5 || g_get_monotonic_time () > deadline)
        break;
      g_ptr_array_unref (messages);
      g_usleep (10 * 1000);
    }
  }
  fail_unless_equals_int (messages->len, 5);
  for (i = 0; i < 5; i++) {
    gchar *expected = g_strdup_printf ("{\"frame\":%" G_GUINT64_FORMAT
        ",\"pts\":%" G_GUINT64_FORMAT ",", frames[i], pts_ms[i] * GST_MSECOND);

    fail_unless (g_str_has_prefix (g_ptr_array_index (messages, i), expected),
        "message %u: %s, expected %s...", i,
        (gchar *) g_ptr_array_index (messages, i), expected);
    g_free (expected);
  }

  g_ptr_array_unref (messages);
  g_free (launch);
  subscriber_free (s);
  broker_free (b);
}

GST_END_TEST;

GST_START_TEST (test_messages_match_visionjson_qos0)
{
  check_messages_match_visionjson (0);
}

GST_END_TEST;

GST_START_TEST (test_messages_match_visionjson_qos1)
{
  check_messages_match_visionjson (1);
}

GST_END_TEST;

/* (b) QoS 1, max-queue 10: 10 frames published; the broker stops; 25 frames
 * while it is away (the 15 oldest dropped, one warning each for the lost
 * connection and for the dropping, the streaming never blocked); the broker
 * comes back on the same port: the 10 queued arrive, then 5 more frames.
 * Lost = dropped = 15, exactly frames 10..24. The test's subscriber leaves
 * before the broker stops and comes back after it restarts, in a persistent
 * session that the broker saves, so that it gets what the element published
 * whichever of the two reconnects first. */
GST_START_TEST (test_broker_restart)
{
  const gchar *topic = "vdtest/restart";
  Broker *b = broker_new (NULL);
  Subscriber *s;
  GstHarness *h;
  GstElement *mqtt;
  GstBus *bus = gst_bus_new ();
  gchar *launch;
  GArray *frames;
  GPtrArray *warnings;
  gint64 t0;
  guint i;

  broker_start (b);
  s = subscriber_new (b->port, topic, "vdtest-restart-sub");
  launch = g_strdup_printf ("visionmqtt port=%d qos=1 max-queue=10 "
      "max-inflight=4 topic=%s", b->port, topic);
  h = mqtt_harness (launch, bus, &mqtt);
  gst_harness_set_src_caps_str (h, caps);
  wait_for (mqtt, "for the connection", is_connected, GINT_TO_POINTER (TRUE));

  push_frames (h, 0, 10);
  wait_for (mqtt, "for 10 acknowledgements", published_at_least,
      GUINT_TO_POINTER (10));
  subscriber_wait_frames (s, topic, 10);
  frames = subscriber_frames (s, topic);
  fail_unless_equals_int (frames->len, 10);
  for (i = 0; i < frames->len; i++)
    fail_unless_equals_uint64 (g_array_index (frames, guint64, i), i);
  g_array_unref (frames);
  subscriber_free (s);
  broker_stop (b);
  wait_for (mqtt, "for the disconnection", is_connected,
      GINT_TO_POINTER (FALSE));

  t0 = g_get_monotonic_time ();
  push_frames (h, 10, 25);
  /* no waiting for the network in the streaming thread */
  fail_unless (g_get_monotonic_time () - t0 < 2 * G_USEC_PER_SEC);
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 15);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 10);
  /* one warning for the outage and one for its first drop, none for the
   * next 14 */
  warnings = wait_messages (bus, GST_MESSAGE_WARNING, "Lost the connection");
  fail_unless_equals_int (count_texts (warnings, "Lost the connection"), 1);
  fail_unless_equals_int (count_texts (warnings, "queue is full"), 1);
  fail_unless_equals_int (warnings->len, 2);
  g_ptr_array_unref (warnings);

  broker_start (b);
  s = subscriber_new (b->port, topic, "vdtest-restart-sub");
  wait_for (mqtt, "for the reconnection", is_connected,
      GINT_TO_POINTER (TRUE));
  wait_for (mqtt, "for the queued 10", published_at_least,
      GUINT_TO_POINTER (20));
  push_frames (h, 35, 5);
  push_eos (h);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 25);
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 15);
  fail_unless_equals_int (count_messages (bus, GST_MESSAGE_INFO,
          "15 messages were dropped"), 1);

  /* the 10 queued during the outage, then the 5 after it; the session may
   * deliver some of frames 0..9 again (QoS 1: their acknowledgements may not
   * have reached the broker before it stopped), never one of the dropped */
  subscriber_wait_frames_from (s, topic, 25, 15);
  frames = subscriber_frames (s, topic);
  {
    GString *list = g_string_new (NULL);
    guint64 next = 25;

    for (i = 0; i < frames->len; i++)
      g_string_append_printf (list, " %" G_GUINT64_FORMAT,
          g_array_index (frames, guint64, i));
    for (i = 0; i < frames->len; i++) {
      guint64 frame = g_array_index (frames, guint64, i);

      if (frame < 10)
        continue;
      fail_unless (frame == next, "frames after the restart:%s", list->str);
      next++;
    }
    fail_unless (next == 40, "frames after the restart:%s", list->str);
    g_string_free (list, TRUE);
  }
  g_array_unref (frames);

  gst_element_set_bus (mqtt, NULL);
  gst_object_unref (mqtt);
  gst_object_unref (bus);
  gst_harness_teardown (h);
  g_free (launch);
  subscriber_free (s);
  broker_free (b);
}

GST_END_TEST;

/* QoS 1 with a broker that stops answering (SIGSTOP: the connection stays
 * up, nothing is acknowledged): nothing more is counted published, at most
 * max-inflight messages are handed over, then max-queue wait, the rest is
 * dropped (oldest first); when the broker answers again every message kept
 * arrives and is counted. */
GST_START_TEST (test_unacknowledged)
{
  const gchar *topic = "vdtest/frozen";
  Broker *b = broker_new (NULL);
  Subscriber *s;
  GstHarness *h;
  GstElement *mqtt;
  gchar *launch;
  GArray *frames;
  guint i;

  broker_start (b);
  s = subscriber_new (b->port, topic, NULL);
  launch = g_strdup_printf ("visionmqtt port=%d qos=1 max-queue=10 "
      "max-inflight=4 topic=%s", b->port, topic);
  h = gst_harness_new_parse (launch);
  mqtt = gst_harness_find_element (h, "visionmqtt");
  gst_harness_set_src_caps_str (h, caps);
  wait_for (mqtt, "for the connection", is_connected, GINT_TO_POINTER (TRUE));
  push_frames (h, 0, 5);
  wait_for (mqtt, "for 5 acknowledgements", published_at_least,
      GUINT_TO_POINTER (5));

  broker_freeze (b);
  push_frames (h, 5, 20);
  /* give acknowledgements, were there any, time to come */
  g_usleep (200 * 1000);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 5);
  /* 4 in flight, 10 queued: the 6 oldest of the queue dropped */
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 6);
  fail_unless (get_connected (mqtt));

  g_subprocess_send_signal (b->process, SIGCONT);
  push_eos (h);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 19);
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 6);
  gst_object_unref (mqtt);
  gst_harness_teardown (h);

  subscriber_wait_frames (s, topic, 19);
  frames = subscriber_frames (s, topic);
  fail_unless_equals_int (frames->len, 19);
  /* 0..4, the 4 in flight (5..8), then the 10 newest (15..24) */
  for (i = 0; i < frames->len; i++)
    fail_unless_equals_uint64 (g_array_index (frames, guint64, i),
        i < 9 ? i : i + 6);
  g_array_unref (frames);
  g_free (launch);
  subscriber_free (s);
  broker_free (b);
}

GST_END_TEST;

/* The first drop of an outage is a warning, once; with no broker at all the
 * element still starts, counts what it drops, and EOS waits flush-timeout. */
GST_START_TEST (test_no_broker)
{
  GstHarness *h;
  GstElement *mqtt;
  GstBus *bus = gst_bus_new ();
  gchar *launch = g_strdup_printf ("visionmqtt port=%d qos=0 max-queue=3 "
      "flush-timeout=200", free_port ());
  gint64 t0;

  h = mqtt_harness (launch, bus, &mqtt);
  gst_harness_set_src_caps_str (h, caps);
  push_frames (h, 0, 8);
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 5);
  fail_unless_equals_int (count_messages (bus, GST_MESSAGE_WARNING,
          "queue is full"), 1);
  t0 = g_get_monotonic_time ();
  push_eos (h);
  fail_unless (g_get_monotonic_time () - t0 >= 190 * 1000);
  fail_unless (g_get_monotonic_time () - t0 < 2 * G_USEC_PER_SEC);
  fail_unless_equals_int (count_messages (bus, GST_MESSAGE_WARNING,
          "3 MQTT messages were not published"), 1);
  gst_element_set_bus (mqtt, NULL);
  gst_harness_teardown (h);
  /* the queue is lost with the stop */
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 8);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 0);
  gst_object_unref (mqtt);
  gst_object_unref (bus);
  g_free (launch);
}

GST_END_TEST;

/* A server that is no MQTT broker: answers every connection with bytes that
 * are no CONNACK (an HTTP error, then a byte MQTT does not define), then
 * closes. */
typedef struct
{
  int fd;
  gint port;
  gint accepted;
  GThread *thread;
} JunkServer;

static gpointer
junk_server_run (gpointer user_data)
{
  JunkServer *j = user_data;
  static const gchar junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n\xf0\xff\xff";
  int client;

  while ((client = accept (j->fd, NULL, NULL)) >= 0) {
    g_atomic_int_inc (&j->accepted);
    if (write (client, junk, sizeof (junk) - 1) < 0) {
      /* the element may already be gone */
    }
    close (client);
  }
  return NULL;
}

GST_START_TEST (test_not_a_broker)
{
  JunkServer j = { 0 };
  struct sockaddr_in address;
  socklen_t length = sizeof (address);
  GstHarness *h;
  GstElement *mqtt;
  GstBus *bus = gst_bus_new ();
  gchar *launch;
  gint64 deadline;

  j.fd = socket (AF_INET, SOCK_STREAM, 0);
  memset (&address, 0, sizeof (address));
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  fail_unless (bind (j.fd, (struct sockaddr *) &address,
          sizeof (address)) == 0);
  fail_unless (listen (j.fd, 8) == 0);
  fail_unless (getsockname (j.fd, (struct sockaddr *) &address,
          &length) == 0);
  j.port = ntohs (address.sin_port);
  j.thread = g_thread_new ("junk-server", junk_server_run, &j);

  launch = g_strdup_printf ("visionmqtt port=%d qos=1 max-queue=4 "
      "flush-timeout=100", j.port);
  h = mqtt_harness (launch, bus, &mqtt);
  gst_harness_set_src_caps_str (h, caps);
  push_frames (h, 0, 10);
  /* it keeps trying, with a growing delay */
  deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (g_atomic_int_get (&j.accepted) < 2) {
    fail_unless (g_get_monotonic_time () < deadline, "no reconnection");
    g_usleep (10 * 1000);
  }
  fail_if (get_connected (mqtt));
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 6);
  push_eos (h);
  fail_unless_equals_int (count_messages (bus, GST_MESSAGE_ERROR, ""), 0);
  gst_element_set_bus (mqtt, NULL);
  gst_harness_teardown (h);
  fail_unless_equals_uint64 (get_counter (mqtt, "dropped"), 10);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 0);
  gst_object_unref (mqtt);
  gst_object_unref (bus);
  g_free (launch);

  shutdown (j.fd, SHUT_RDWR);
  g_thread_join (j.thread);
  close (j.fd);
}

GST_END_TEST;

/* (c) a broker with a password file: the wrong password is an element error
 * naming the broker's reason; the right one publishes. */
GST_START_TEST (test_credentials)
{
  Broker *b = broker_new (NULL);
  gchar *passwd = broker_file (b, "passwd");
  const gchar *passwd_argv[] = { "mosquitto_passwd", "-c", "-b", passwd,
    "camera", "s3cret", NULL
  };
  gchar *config = g_strdup_printf ("password_file %s", passwd);
  GstHarness *h;
  GstElement *mqtt;
  GstBus *bus = gst_bus_new ();
  GError *error;
  gchar *launch;
  GstBuffer *buffer;

  run_tool (passwd_argv);
  g_free (b->extra_config);
  b->extra_config = g_strdup_printf ("%s\nallow_anonymous false", config);
  broker_start (b);

  launch = g_strdup_printf ("visionmqtt port=%d username=camera "
      "password=wrong", b->port);
  h = mqtt_harness (launch, bus, &mqtt);
  gst_harness_set_src_caps_str (h, caps);
  error = wait_error (bus);
  fail_unless (g_error_matches (error, GST_RESOURCE_ERROR,
          GST_RESOURCE_ERROR_NOT_AUTHORIZED), "%s", error->message);
  fail_unless (strstr (error->message, "refused the connection") != NULL,
      "%s", error->message);
  /* mosquitto 2.0 answers MQTT 3.1.1's "not authorised" (5) to a bad
   * password; other brokers "bad user name or password" (4) */
  fail_unless (strstr (error->message, "not authorised") != NULL
      || strstr (error->message, "bad user name or password") != NULL,
      "%s", error->message);
  g_error_free (error);
  /* the stream stops */
  buffer = new_frame (0);
  fail_unless_equals_int (gst_harness_push (h, buffer), GST_FLOW_ERROR);
  gst_element_set_bus (mqtt, NULL);
  gst_object_unref (mqtt);
  gst_harness_teardown (h);
  g_free (launch);

  launch = g_strdup_printf ("visionmqtt port=%d username=camera "
      "password=s3cret", b->port);
  h = mqtt_harness (launch, bus, &mqtt);
  gst_harness_set_src_caps_str (h, caps);
  push_frames (h, 0, 3);
  push_eos (h);
  fail_unless_equals_uint64 (get_counter (mqtt, "published"), 3);
  check_no_problems (bus);
  gst_element_set_bus (mqtt, NULL);
  gst_object_unref (mqtt);
  gst_harness_teardown (h);

  g_free (launch);
  g_free (config);
  g_free (passwd);
  gst_object_unref (bus);
  broker_free (b);
}

GST_END_TEST;

/* (d) TLS with a CA and a server certificate made here: published through
 * the TLS listener (received on a plain one); a CA that did not sign the
 * broker's certificate is an element error naming the verification. */
GST_START_TEST (test_tls)
{
  Broker *b = broker_new (NULL);
  gchar *ca_key = broker_file (b, "ca.key"), *ca = broker_file (b, "ca.pem");
  gchar *key = broker_file (b, "server.key"), *csr =
      broker_file (b, "server.csr");
  gchar *cert = broker_file (b, "server.pem"), *ext =
      broker_file (b, "ext.cnf");
  gchar *other_key = broker_file (b, "other.key"), *other =
      broker_file (b, "other.pem");
  const gchar *ca_argv[] = { "openssl", "req", "-x509", "-newkey", "ec",
    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", ca_key,
    "-out", ca, "-days", "2", "-subj", "/CN=vdtest CA", NULL
  };
  const gchar *other_argv[] = { "openssl", "req", "-x509", "-newkey", "ec",
    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
    other_key, "-out", other, "-days", "2", "-subj", "/CN=other CA", NULL
  };
  const gchar *csr_argv[] = { "openssl", "req", "-newkey", "ec", "-pkeyopt",
    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", csr,
    "-subj", "/CN=localhost", NULL
  };
  const gchar *sign_argv[] = { "openssl", "x509", "-req", "-in", csr, "-CA",
    ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days", "2",
    "-extfile", ext, NULL
  };
  const gchar *topic = "vdtest/tls";
  Subscriber *s;
  GstHarness *h;
  GstElement *mqtt;
  GstBus *bus = gst_bus_new ();
  GError *error;
  gchar *launch;
  GArray *frames;

  fail_unless (g_file_set_contents (ext,
          "subjectAltName=DNS:localhost,IP:127.0.0.1\n", -1, NULL));
  run_tool (ca_argv);
  run_tool (other_argv);
  run_tool (csr_argv);
  run_tool (sign_argv);
  /* the element's listener (b->port) is TLS, the subscriber's plain */
  b->plain_port = free_port ();
  b->listener_options = g_strdup_printf ("cafile %s\ncertfile %s\n"
      "keyfile %s", ca, cert, key);
  broker_start (b);
  {
    gint tls_port = b->port;

    s = subscriber_new (b->plain_port, topic, NULL);

    launch = g_strdup_printf ("visionmqtt host=localhost port=%d topic=%s "
        "cafile=\"%s\"", tls_port, topic, ca);
    h = mqtt_harness (launch, bus, &mqtt);
    gst_harness_set_src_caps_str (h, caps);
    push_frames (h, 0, 5);
    push_eos (h);
    fail_unless_equals_uint64 (get_counter (mqtt, "published"), 5);
    check_no_problems (bus);
    gst_element_set_bus (mqtt, NULL);
    gst_object_unref (mqtt);
    gst_harness_teardown (h);
    g_free (launch);
    subscriber_wait_frames (s, topic, 5);
    frames = subscriber_frames (s, topic);
    fail_unless_equals_int (frames->len, 5);
    g_array_unref (frames);

    /* not signed by this CA */
    launch = g_strdup_printf ("visionmqtt host=localhost port=%d topic=%s "
        "cafile=\"%s\"", tls_port, topic, other);
    h = mqtt_harness (launch, bus, &mqtt);
    gst_harness_set_src_caps_str (h, caps);
    error = wait_error (bus);
    fail_unless (strstr (error->message, "certificate verify failed") != NULL,
        "%s", error->message);
    g_error_free (error);
    gst_element_set_bus (mqtt, NULL);
    gst_object_unref (mqtt);
    gst_harness_teardown (h);
    g_free (launch);
  }

  subscriber_free (s);
  gst_object_unref (bus);
  g_free (ca_key);
  g_free (ca);
  g_free (key);
  g_free (csr);
  g_free (cert);
  g_free (ext);
  g_free (other_key);
  g_free (other);
  broker_free (b);
}

GST_END_TEST;

/* Settings that cannot work fail the start, with the cause in the error. */
GST_START_TEST (test_start_errors)
{
  static const struct
  {
    const gchar *properties;
    const gchar *expected;
  } cases[] = {
    {"host=nonexistent.invalid", "Could not resolve the MQTT broker host "
          "\"nonexistent.invalid\""},
    {"host=\"\"", "No MQTT broker host set"},
    {"cafile=/nonexistent/ca.pem", "Could not read the CA file "
          "\"/nonexistent/ca.pem\""},
    {"topic=cameras/{camera}", "unknown placeholder {camera}"},
    {"topic=cameras/+/x", "not a valid MQTT topic name"},
    {"topic=cameras/{source-id} source-id=a/b", "{source-id} is \"a/b\""},
    {"topic=cameras/{", "\"{\" without \"}\""},
    {"password=x", "a password needs a username"},
    {"certfile=/etc/hostname cafile=/etc/hostname", "certfile and keyfile "
          "go together"},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    gchar *launch = g_strdup_printf ("videotestsrc num-buffers=1 ! "
        "visionmqtt port=%d %s ! fakesink", free_port (),
        cases[i].properties);
    gchar *error = vdtest_pipeline_error (launch);

    fail_unless (error != NULL, "no error for %s", cases[i].properties);
    fail_unless (strstr (error, cases[i].expected) != NULL,
        "%s: expected \"%s\" in: %s", cases[i].properties, cases[i].expected,
        error);
    g_free (error);
    g_free (launch);
  }
}

GST_END_TEST;

GST_START_TEST (test_properties)
{
  GstElement *e = gst_element_factory_make ("visionmqtt", NULL);
  gchar *host, *topic;
  guint qos, max_queue;
  GParamSpec *pspec;

  fail_unless (e != NULL);
  g_object_get (e, "host", &host, "topic", &topic, "qos", &qos, "max-queue",
      &max_queue, NULL);
  fail_unless_equals_string (host, "localhost");
  fail_unless_equals_string (topic,
      "visiondetect/{hostname}/{source-id}/detections");
  fail_unless_equals_int (qos, 1);
  fail_unless_equals_int (max_queue, 1000);
  g_free (host);
  g_free (topic);
  /* the password is never read back */
  pspec = g_object_class_find_property (G_OBJECT_GET_CLASS (e), "password");
  fail_unless (pspec != NULL && !(pspec->flags & G_PARAM_READABLE));
  g_object_set (e, "password", "secret", NULL);
  pspec = g_object_class_find_property (G_OBJECT_GET_CLASS (e), "dropped");
  fail_unless (pspec != NULL && !(pspec->flags & G_PARAM_WRITABLE));
  {
    /* documented as test_plugin does for the other elements */
    GParamSpec **props;
    guint n, p;

    props = g_object_class_list_properties (G_OBJECT_GET_CLASS (e), &n);
    for (p = 0; p < n; p++)
      if (props[p]->owner_type == G_OBJECT_TYPE (e))
        fail_unless (strlen (g_param_spec_get_blurb (props[p])) >= 20,
            "visionmqtt::%s has no useful description", props[p]->name);
    g_free (props);
  }
  gst_object_unref (e);
}

GST_END_TEST;

static Suite *
visionmqtt_suite (void)
{
  Suite *s = suite_create ("visionmqtt");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, vdtest_load_plugin, NULL);
  tcase_set_timeout (tc, 60);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_messages_match_visionjson_qos0);
  tcase_add_test (tc, test_flush_restarts_frame);
  tcase_add_test (tc, test_messages_match_visionjson_qos1);
  tcase_add_test (tc, test_broker_restart);
  tcase_add_test (tc, test_unacknowledged);
  tcase_add_test (tc, test_no_broker);
  tcase_add_test (tc, test_not_a_broker);
  tcase_add_test (tc, test_credentials);
  tcase_add_test (tc, test_tls);
  tcase_add_test (tc, test_start_errors);
  tcase_add_test (tc, test_properties);
  return s;
}

int
main (int argc, char **argv)
{
  Suite *s;
  int failed;

  /* Debian installs the broker in /usr/sbin, often not in a user's PATH */
  mosquitto_path = g_find_program_in_path ("mosquitto");
  if (mosquitto_path == NULL
      && g_file_test ("/usr/sbin/mosquitto", G_FILE_TEST_IS_EXECUTABLE))
    mosquitto_path = g_strdup ("/usr/sbin/mosquitto");
  if (mosquitto_path == NULL) {
    g_printerr ("the mosquitto broker is not installed: skipped\n");
    return 77;
  }
  mosquitto_lib_init ();
  gst_check_init (&argc, &argv);
  s = visionmqtt_suite ();
  failed = gst_check_run_suite (s, "visionmqtt", __FILE__);
  mosquitto_lib_cleanup ();
  g_free (mosquitto_path);
  return failed ? 1 : 0;
}
