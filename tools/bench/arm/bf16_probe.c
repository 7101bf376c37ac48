/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What oneDNN gives bf16 on the CPU it runs on: the implementation it picks for the
 * engine's kinds of convolution (the 7x7 stride-2 stem, 3x3, 1x1 and 3x3 stride-2
 * ones, bf16 in and bf16 or float32 out, every layout its choice and NHWC), for a
 * float32 convolution with the bf16 fpmath mode (the "fast math" that lets a library
 * compute a float32 layer in bf16), and for bf16 matmuls like the box head's. Run
 * under each emulated arm64 CPU by bf16-probe.sh (docs/engine.md, "bf16 on arm64");
 * it only creates primitive descriptors, nothing runs. oneDNN 3.x's C API (Debian 13). */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>

static dnnl_engine_t engine;

static const char *type_name(dnnl_data_type_t dt)
{
    return dt == dnnl_bf16 ? "bf16" : "f32";
}

static void report(const char *what, dnnl_status_t status, const_dnnl_primitive_desc_t pd)
{
    const char *impl = "none (unimplemented)";
    if (status == dnnl_success)
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    printf("%-58s %s\n", what, impl);
}

static void conv(int ic, int oc, int hw, int k, int stride, dnnl_data_type_t src_dt,
                 dnnl_data_type_t dst_dt, dnnl_format_tag_t tag, int fpmath_bf16)
{
    int out = (hw + 2 * (k / 2) - k) / stride + 1;
    dnnl_dims_t src_dims = {1, ic, hw, hw}, wei_dims = {oc, ic, k, k}, bias_dims = {oc};
    dnnl_dims_t dst_dims = {1, oc, out, out}, strides = {stride, stride}, dilates = {0, 0};
    dnnl_dims_t pad = {k / 2, k / 2};
    dnnl_memory_desc_t src, wei, bias, dst;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t post_ops;
    dnnl_primitive_desc_t pd = NULL;
    char what[128];

    dnnl_memory_desc_create_with_tag(&src, 4, src_dims, src_dt, tag);
    dnnl_memory_desc_create_with_tag(&wei, 4, wei_dims, src_dt, dnnl_format_tag_any);
    dnnl_memory_desc_create_with_tag(&bias, 1, bias_dims, dnnl_f32, dnnl_x);
    dnnl_memory_desc_create_with_tag(&dst, 4, dst_dims, dst_dt, tag);
    dnnl_primitive_attr_create(&attr);
    if (fpmath_bf16)
        dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_bf16);
    dnnl_post_ops_create(&post_ops);
    dnnl_post_ops_append_eltwise(post_ops, dnnl_eltwise_relu, 0.f, 0.f);
    dnnl_primitive_attr_set_post_ops(attr, post_ops);
    dnnl_status_t status = dnnl_convolution_forward_primitive_desc_create(
        &pd, engine, dnnl_forward_inference, dnnl_convolution_direct, src, wei, bias, dst, strides,
        dilates, pad, pad, attr);
    snprintf(what, sizeof(what), "conv %s->%s%s %s %d->%d %dx%d k%d s%d", type_name(src_dt),
             type_name(dst_dt), fpmath_bf16 ? " (fpmath bf16)" : "",
             tag == dnnl_format_tag_any ? "any" : "nhwc", ic, oc, hw, hw, k, stride);
    report(what, status, pd);
    if (status == dnnl_success)
        dnnl_primitive_desc_destroy(pd);
    dnnl_post_ops_destroy(post_ops);
    dnnl_primitive_attr_destroy(attr);
    dnnl_memory_desc_destroy(src);
    dnnl_memory_desc_destroy(wei);
    dnnl_memory_desc_destroy(bias);
    dnnl_memory_desc_destroy(dst);
}

static void matmul(int m, int k, int n, dnnl_data_type_t src_dt, dnnl_data_type_t dst_dt)
{
    dnnl_dims_t src_dims = {m, k}, wei_dims = {k, n}, bias_dims = {1, n}, dst_dims = {m, n};
    dnnl_memory_desc_t src, wei, bias, dst;
    dnnl_primitive_desc_t pd = NULL;
    char what[128];

    dnnl_memory_desc_create_with_tag(&src, 2, src_dims, src_dt, dnnl_ab);
    dnnl_memory_desc_create_with_tag(&wei, 2, wei_dims, src_dt, dnnl_format_tag_any);
    dnnl_memory_desc_create_with_tag(&bias, 2, bias_dims, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_create_with_tag(&dst, 2, dst_dims, dst_dt, dnnl_ab);
    dnnl_status_t status =
        dnnl_matmul_primitive_desc_create(&pd, engine, src, wei, bias, dst, NULL);
    snprintf(what, sizeof(what), "matmul %s->%s %dx%d by %dx%d", type_name(src_dt),
             type_name(dst_dt), m, k, k, n);
    report(what, status, pd);
    if (status == dnnl_success)
        dnnl_primitive_desc_destroy(pd);
    dnnl_memory_desc_destroy(src);
    dnnl_memory_desc_destroy(wei);
    dnnl_memory_desc_destroy(bias);
    dnnl_memory_desc_destroy(dst);
}

int main(void)
{
    /* in channels, out channels, size, kernel, stride */
    static const int shapes[][5] = {
        {3, 64, 128, 7, 2},  {64, 64, 32, 3, 1},   {64, 256, 32, 1, 1},
        {256, 64, 32, 1, 1}, {128, 128, 16, 3, 2}, {256, 256, 16, 3, 1},
    };
    const dnnl_version_t *v = dnnl_version();

    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
        fprintf(stderr, "bf16_probe: no oneDNN CPU engine\n");
        return 1;
    }
    printf("oneDNN %d.%d.%d, effective ISA 0x%x\n", v->major, v->minor, v->patch,
           (unsigned)dnnl_get_effective_cpu_isa());
    for (int nhwc = 0; nhwc <= 1; nhwc++) {
        dnnl_format_tag_t tag = nhwc ? dnnl_nhwc : dnnl_format_tag_any;
        for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
            const int *s = shapes[i];
            conv(s[0], s[1], s[2], s[3], s[4], dnnl_bf16, dnnl_bf16, tag, 0);
        }
        conv(256, 256, 16, 3, 1, dnnl_bf16, dnnl_f32, tag, 0);
        conv(256, 256, 16, 3, 1, dnnl_f32, dnnl_f32, tag, 0);
        conv(256, 256, 16, 3, 1, dnnl_f32, dnnl_f32, tag, 1);
    }
    matmul(256, 256 * 7 * 7, 1024, dnnl_bf16, dnnl_bf16);
    matmul(256, 1024, 1024, dnnl_bf16, dnnl_f32);
    matmul(256, 1024, 1024, dnnl_f32, dnnl_f32);
    dnnl_engine_destroy(engine);
    return 0;
}
