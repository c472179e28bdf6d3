/* The syntax tree of a .net file, as the parser builds it.
 *
 * One node type for everything: kind says which fields mean what.  Children are
 * a, b, c (fixed roles, listed per kind below) and items[0..n) (lists).  Nodes
 * live in the parse's arena and are freed with it. */
#ifndef GNC_AST_H
#define GNC_AST_H

#include <stdint.h>

#include "base.h"
#include "diag.h"
#include "ir.h"

typedef enum {
    /* expressions */
    AST_INT,       /* ival */
    AST_FLOAT,     /* fval */
    AST_BOOL,      /* ival */
    AST_STRING,    /* str */
    AST_NAME,      /* str */
    AST_LIST,      /* items */
    AST_UNARY,     /* op ('-' or '!'), a */
    AST_BINARY,    /* op (a token: '+', AST_OP_EQ, ...), a, b */
    AST_CALL,      /* str: callee; items: arguments (AST_KWARG for keyword ones) */
    AST_KWARG,     /* str = a */
    AST_MEMBER,    /* a.str (shape, rank) */
    AST_INDEX,     /* a[items]: each item an expression, an AST_RANGE or AST_ELLIPSIS */
    AST_RANGE,     /* start:stop:step in a subscript, a, b and c, each NULL if left out */
    AST_ELLIPSIS,  /* ... in a subscript */
    /* statements */
    AST_ASSIGN,    /* items: target names (AST_NAME), a: value */
    AST_IF,        /* a: condition, b: then block, c: else block or AST_IF or NULL */
    AST_FOR,       /* str: variable, a..b range, c: body */
    AST_RETURN,    /* items: values */
    AST_INPUT,     /* str: name, b: dtype (AST_NAME), items: dims */
    AST_OUTPUT,    /* str: name, a: value or NULL (output of the variable str) */
    AST_LOSS,      /* a */
    AST_BLOCK,     /* items: statements */
    /* top level */
    AST_IMPORT,    /* str: path */
    AST_CONST,     /* str = a (also allowed as a statement) */
    AST_DEF,       /* str: name, items: params (AST_PARAM), c: body */
    AST_MODEL,     /* str: name, items: params (AST_PARAM), c: body */
    AST_PARAM,     /* str, a: default or NULL */
    AST_PROGRAM    /* items: top-level declarations */
} ast_kind;

/* Binary operators that are not single characters. */
enum { AST_OP_EQ = 256, AST_OP_NE, AST_OP_LE, AST_OP_GE, AST_OP_AND, AST_OP_OR, AST_OP_POW };

typedef struct ast ast;
struct ast {
    ast_kind kind;
    ir_loc loc;
    int op;
    int64_t ival;
    double fval;
    const char *str;
    ast *a, *b, *c;
    ast **items;
    int n, cap;
};

/* The state of one parse, shared by the lexer and the parser. */
typedef struct {
    base_arena **arena;
    diag *d;
    const char *file;      /* as registered with diag_add_source */
    int depth;             /* ( and [ nesting: newlines inside them are not separators */
    int line, col;         /* where the lexer is */
    ast *program;
} fe_parse_state;

ast *ast_new(fe_parse_state *p, ast_kind kind, ir_loc loc);
ast *ast_push(fe_parse_state *p, ast *list, ast *item);    /* returns list */
const char *fe_strndup(fe_parse_state *p, const char *s, size_t n);

/* Parses text (registered on p->d as p->file); returns the program, or NULL
 * when a syntax error was reported. */
ast *fe_parse(fe_parse_state *p, const char *text, size_t len);

#endif
