/* Syntax-tree construction helpers for the parser. */
#include "ast.h"

#include <stdlib.h>
#include <string.h>

struct fe_arena {
    struct fe_arena *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *fe_alloc(fe_arena **arena, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    fe_arena *a = *arena;
    if (!a || a->cap - a->used < size) {
        size_t cap = size > 60000 ? size : 60000;
        fe_arena *b = malloc(sizeof *b + cap);
        if (!b) {
            fputs("gnc: out of memory\n", stderr);
            abort();
        }
        b->next = a;
        b->used = 0;
        b->cap = cap;
        *arena = a = b;
    }
    void *p = a->data + a->used;
    a->used += size;
    memset(p, 0, size);
    return p;
}

void fe_arena_free(fe_arena **arena)
{
    for (fe_arena *a = *arena, *next; a; a = next) {
        next = a->next;
        free(a);
    }
    *arena = NULL;
}

ast *ast_new(fe_parse_state *p, ast_kind kind, ir_loc loc)
{
    ast *n = fe_alloc(p->arena, sizeof *n);
    n->kind = kind;
    n->loc = loc;
    return n;
}

ast *ast_push(fe_parse_state *p, ast *list, ast *item)
{
    if (!item)
        return list; /* a statement lost to a syntax error */
    if (list->n == list->cap) {
        int cap = list->cap ? 2 * list->cap : 4;
        ast **items = fe_alloc(p->arena, (size_t)cap * sizeof *items);
        if (list->n)
            memcpy(items, list->items, (size_t)list->n * sizeof *items);
        list->items = items;
        list->cap = cap;
    }
    list->items[list->n++] = item;
    return list;
}

const char *fe_strndup(fe_parse_state *p, const char *s, size_t n)
{
    char *r = fe_alloc(p->arena, n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}
