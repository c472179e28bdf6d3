/* gnc dump --format dot: the graph as Graphviz DOT (docs/cli.md, docs/gallery.md).
 *
 * A box per node (its op, the value it computes and that value's type; the
 * parameters it reads listed under it rather than drawn, which would bury the
 * dataflow), an ellipse per input and output, an edge per operand.  The
 * members of a fused group are a dashed cluster: one kernel.  A partitioned
 * program draws each device as a cluster; its communication nodes are red,
 * and dashed red edges join the nodes of one collective (by their id) and a
 * send to its recv, so what crosses between devices is visible. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* s as the inside of a DOT string: quotes and backslashes escaped, anything
 * outside printable ASCII as '?' (names are user text) */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s >= 0x20 && *s < 0x7f ? *s : '?', f);
    }
}

static int is_param(const ir_value *v)
{
    return v->kind == IR_VALUE_PARAM || v->kind == IR_VALUE_BUFFER || v->kind == IR_VALUE_STATE;
}

static void put_node(FILE *f, const ir_node *n, const char *indent)
{
    char t[128];
    fprintf(f, "%sv%d [label=\"", indent, n->out[0]->id);
    put_text(f, ir_ops[n->op].name);
    fputs("\\n", f);
    put_text(f, n->out[0]->name);
    fprintf(f, "\\n%s", ir_type_str(&n->out[0]->type, t, sizeof t));
    int params = 0;
    for (int i = 0; i < n->nin; i++)
        if (is_param(n->in[i])) {
            fputs("\\l+ ", f);
            put_text(f, n->in[i]->name);
            fprintf(f, " %s", ir_type_str(&n->in[i]->type, t, sizeof t));
            params++;
        }
    fputs(params ? "\\l\"" : "\"", f);
    if (ir_op_communicates(n->op))
        fputs(", color=red, fontcolor=red", f);
    fputs("];\n", f);
}

/* The nodes of device dev (every node when dev < 0), fused groups as clusters. */
static void put_nodes(FILE *f, const ir_graph *g, int dev, const char *indent)
{
    int open = 0;
    ir_for_each_node(g, n) {
        if (dev >= 0 && n->device != dev)
            continue;
        if (open && n->group != open) {
            fprintf(f, "%s}\n", indent);
            open = 0;
        }
        if (n->group && n->group != open) {
            fprintf(f, "%ssubgraph cluster_g%d_%d { label=\"fused kernel %d\"; style=dashed; "
                    "color=gray40;\n", indent, n->group, dev < 0 ? 0 : dev, n->group);
            open = n->group;
        }
        put_node(f, n, open ? "    " : "  ");
    }
    if (open)
        fprintf(f, "%s}\n", indent);
}

static int64_t comm_id(const ir_node *n)
{
    const ir_attr *a = ir_get_attr(n, "id");
    return a ? a->i : -1;
}

void cli_print_dot(const ir_graph *g, FILE *f)
{
    char t[128];
    int ndev = 1;
    ir_for_each_node(g, n)
        ndev = n->device + 1 > ndev ? n->device + 1 : ndev;
    fputs("digraph \"", f);
    put_text(f, g->name ? g->name : "graph");
    fputs("\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [color=gray30];\n", f);
    for (int i = 0; i < g->ninputs; i++) {
        fprintf(f, "  v%d [shape=ellipse, label=\"", g->inputs[i]->id);
        put_text(f, g->inputs[i]->name);
        fprintf(f, "\\n%s\"];\n", ir_type_str(&g->inputs[i]->type, t, sizeof t));
    }
    if (ndev == 1) {
        put_nodes(f, g, -1, "  ");
    } else {
        for (int d = 0; d < ndev; d++) {
            fprintf(f, "  subgraph cluster_device%d { label=\"device %d\"; style=rounded; "
                    "color=blue;\n", d, d);
            put_nodes(f, g, d, "  ");
            fputs("  }\n", f);
        }
    }
    /* the dataflow: an edge per operand computed by a node or fed as an input */
    ir_for_each_node(g, n)
        for (int i = 0; i < n->nin; i++)
            if (!is_param(n->in[i]))
                fprintf(f, "  v%d -> v%d;\n", n->in[i]->id, n->out[0]->id);
    for (int i = 0; i < g->noutputs; i++) {
        fprintf(f, "  out%d [shape=ellipse, style=bold, label=\"output ", i);
        put_text(f, g->outputs[i].name);
        fputs("\"];\n", f);
        if (!is_param(g->outputs[i].value))
            fprintf(f, "  v%d -> out%d;\n", g->outputs[i].value->id, i);
    }
    if (g->loss && !is_param(g->loss))
        fprintf(f, "  loss [shape=ellipse, style=bold, label=\"loss\"];\n  v%d -> loss;\n",
                g->loss->id);
    /* between devices: a collective's nodes in a chain (by id), a send to its recv */
    ir_for_each_node(g, n) {
        if (!ir_op_communicates(n->op) || comm_id(n) < 0 || n->op == IR_OP_RECV)
            continue;
        for (const ir_node *m = n->next; m; m = m->next) {
            if (!ir_op_communicates(m->op) || comm_id(m) != comm_id(n))
                continue;
            int pair = n->op == IR_OP_SEND ? m->op == IR_OP_RECV : m->op == n->op;
            if (pair && m->device != n->device) {
                fprintf(f, "  v%d -> v%d [style=dashed, color=red, constraint=false%s];\n",
                        n->out[0]->id, m->out[0]->id, n->op == IR_OP_SEND ? "" : ", dir=none");
                break;
            }
        }
    }
    fputs("}\n", f);
}
