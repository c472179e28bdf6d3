/* Syntax-tree construction helpers for the parser. */
#include "ast.h"

#include <stdlib.h>
#include <string.h>

ast *ast_new(fe_parse_state *p, ast_kind kind, ir_loc loc)
{
    ast *n = base_arena_alloc(p->arena, sizeof *n);
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
        ast **items = base_arena_alloc(p->arena, (size_t)cap * sizeof *items);
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
    char *r = base_arena_alloc(p->arena, n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}
