/* The .net grammar.  Statements end at a newline or ';' (newlines inside ( ) and
 * [ ] do not count, see lexer.l); blocks are { }.  On a syntax error the parser
 * reports it, skips to the end of the statement and goes on, so one run shows
 * every independent mistake. */
%code requires {
#include "ast.h"
typedef void *yyscan_t;
}

%code {
#include "base.h"
#include "lexer.h"

/* bison's stack past its first 200 entries, allocated as the stages do */
#define YYMALLOC base_xmalloc
#define YYFREE base_free

static void yyerror(const YYLTYPE *l, yyscan_t scanner, fe_parse_state *p, const char *msg);

#define LOC(l) ((ir_loc){p->file, (l).first_line, (l).first_column})
#define NODE(kind, l) ast_new(p, (kind), LOC(l))

static ast *binary(fe_parse_state *p, int op, ast *a, ast *b, YYLTYPE l)
{
    ast *n = NODE(AST_BINARY, l);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}
}

%define api.pure full
%define parse.error custom
%define parse.lac full
%locations
%param {yyscan_t scanner}
%parse-param {fe_parse_state *p}

%union {
    int64_t ival;
    double fval;
    const char *str;
    ast *node;
}

%token <ival> INT "integer" BOOL "boolean"
%token <fval> FLOAT "number"
%token <str> STRING "string" IDENT "name"
%token DEF "def" MODEL "model" CONST "const" IMPORT "import" INPUT "input"
%token OUTPUT "output" LOSS "loss" RETURN "return" IF "if" ELSE "else"
%token FOR "for" IN "in"
%token DOTDOT ".." ELLIPSIS "..." EQ "==" NE "!=" LE "<=" GE ">=" AND "&&" OR "||" POW "**"
%token NEWLINE "end of line"

%type <node> tops top block stmts stmt if_stmt else_part targets params params1 param
%type <node> expr postfix primary exprs exprs1 args args1 arg subscripts subscript bound

%left OR
%left AND
%left EQ NE
%left '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%'
%right UNARY
%right POW                      /* -a ** b is -(a ** b), a ** -b works: Python's */

%%

program
    : seps_opt                  { p->program = NODE(AST_PROGRAM, @$); }
    | seps_opt tops seps_opt    { p->program = $2; }
    ;

seps : sep | seps sep ;
sep : NEWLINE | ';' ;
seps_opt : %empty | seps ;

tops
    : top                       { $$ = ast_push(p, NODE(AST_PROGRAM, @1), $1); }
    | tops seps top             { $$ = ast_push(p, $1, $3); }
    ;

top
    : IMPORT STRING             { $$ = NODE(AST_IMPORT, @2); $$->str = $2; }
    | CONST IDENT '=' expr      { $$ = NODE(AST_CONST, @2); $$->str = $2; $$->a = $4; }
    | DEF IDENT '(' params ')' block
                                { $$ = $4; $$->kind = AST_DEF; $$->loc = LOC(@2);
                                  $$->str = $2; $$->c = $6; }
    | MODEL IDENT '(' params ')' block
                                { $$ = $4; $$->kind = AST_MODEL; $$->loc = LOC(@2);
                                  $$->str = $2; $$->c = $6; }
    | error                     { $$ = NULL; }
    ;

params
    : %empty                    { $$ = NODE(AST_DEF, @$); }
    | params1
    ;

params1
    : param                     { $$ = ast_push(p, NODE(AST_DEF, @1), $1); }
    | params1 ',' param         { $$ = ast_push(p, $1, $3); }
    ;

param
    : IDENT                     { $$ = NODE(AST_PARAM, @1); $$->str = $1; }
    | IDENT '=' expr            { $$ = NODE(AST_PARAM, @1); $$->str = $1; $$->a = $3; }
    ;

block
    : '{' seps_opt '}'                  { $$ = NODE(AST_BLOCK, @1); }
    | '{' seps_opt stmts seps_opt '}'   { $$ = $3; $$->loc = LOC(@1); }
    ;

stmts
    : stmt                      { $$ = ast_push(p, NODE(AST_BLOCK, @1), $1); }
    | stmts seps stmt           { $$ = ast_push(p, $1, $3); }
    ;

stmt
    : targets '=' expr          { $$ = $1; $$->a = $3; $$->loc = LOC(@2); }
    | if_stmt
    | FOR IDENT IN expr DOTDOT expr block
                                { $$ = NODE(AST_FOR, @1); $$->str = $2; $$->a = $4;
                                  $$->b = $6; $$->c = $7; }
    | RETURN exprs1             { $$ = $2; $$->kind = AST_RETURN; $$->loc = LOC(@1); }
    | INPUT IDENT ':' IDENT '[' exprs ']'
                                { $$ = $6; $$->kind = AST_INPUT; $$->loc = LOC(@2);
                                  $$->str = $2; $$->b = NODE(AST_NAME, @4); $$->b->str = $4; }
    | OUTPUT IDENT              { $$ = NODE(AST_OUTPUT, @2); $$->str = $2; }
    | OUTPUT IDENT '=' expr     { $$ = NODE(AST_OUTPUT, @2); $$->str = $2; $$->a = $4; }
    | LOSS expr                 { $$ = NODE(AST_LOSS, @1); $$->a = $2; }
    | CONST IDENT '=' expr      { $$ = NODE(AST_CONST, @2); $$->str = $2; $$->a = $4; }
    | ELSE block                { diag_error(p->d, LOC(@1), "unexpected else: it goes on the "
                                             "same line as the '}' before it"); $$ = NULL; }
    | ELSE if_stmt              { diag_error(p->d, LOC(@1), "unexpected else: it goes on the "
                                             "same line as the '}' before it"); $$ = NULL; }
    | error                     { $$ = NULL; }
    ;

if_stmt
    : IF expr block else_part   { $$ = NODE(AST_IF, @1); $$->a = $2; $$->b = $3; $$->c = $4; }
    ;

else_part
    : %empty                    { $$ = NULL; }
    | ELSE block                { $$ = $2; }
    | ELSE if_stmt              { $$ = $2; }
    ;

targets
    : IDENT                     { ast *t = NODE(AST_NAME, @1); t->str = $1;
                                  $$ = ast_push(p, NODE(AST_ASSIGN, @1), t); }
    | targets ',' IDENT         { ast *t = NODE(AST_NAME, @3); t->str = $3;
                                  $$ = ast_push(p, $1, t); }
    ;

expr
    : expr OR expr              { $$ = binary(p, AST_OP_OR, $1, $3, @2); }
    | expr AND expr             { $$ = binary(p, AST_OP_AND, $1, $3, @2); }
    | expr EQ expr              { $$ = binary(p, AST_OP_EQ, $1, $3, @2); }
    | expr NE expr              { $$ = binary(p, AST_OP_NE, $1, $3, @2); }
    | expr '<' expr             { $$ = binary(p, '<', $1, $3, @2); }
    | expr LE expr              { $$ = binary(p, AST_OP_LE, $1, $3, @2); }
    | expr '>' expr             { $$ = binary(p, '>', $1, $3, @2); }
    | expr GE expr              { $$ = binary(p, AST_OP_GE, $1, $3, @2); }
    | expr '+' expr             { $$ = binary(p, '+', $1, $3, @2); }
    | expr '-' expr             { $$ = binary(p, '-', $1, $3, @2); }
    | expr '*' expr             { $$ = binary(p, '*', $1, $3, @2); }
    | expr '/' expr             { $$ = binary(p, '/', $1, $3, @2); }
    | expr '%' expr             { $$ = binary(p, '%', $1, $3, @2); }
    | expr POW expr             { $$ = binary(p, AST_OP_POW, $1, $3, @2); }
    | '-' expr %prec UNARY      { $$ = NODE(AST_UNARY, @1); $$->op = '-'; $$->a = $2; }
    | '!' expr %prec UNARY      { $$ = NODE(AST_UNARY, @1); $$->op = '!'; $$->a = $2; }
    | postfix
    ;

postfix
    : primary
    | postfix '.' IDENT         { $$ = NODE(AST_MEMBER, @3); $$->a = $1; $$->str = $3; }
    | postfix '[' subscripts ']'
                                { $$ = $3; $$->kind = AST_INDEX; $$->loc = LOC(@2);
                                  $$->a = $1; }
    ;

/* x[i], x[a:b], x[a:b:s], x[..., i] and lists of them: Python's and PyTorch's */
subscripts
    : subscript                 { $$ = ast_push(p, NODE(AST_INDEX, @1), $1); }
    | subscripts ',' subscript  { $$ = ast_push(p, $1, $3); }
    ;

subscript
    : expr
    | bound ':' bound           { $$ = NODE(AST_RANGE, @2); $$->a = $1; $$->b = $3; }
    | bound ':' bound ':' bound { $$ = NODE(AST_RANGE, @2); $$->a = $1; $$->b = $3;
                                  $$->c = $5; }
    | ELLIPSIS                  { $$ = NODE(AST_ELLIPSIS, @1); }
    ;

bound
    : %empty                    { $$ = NULL; }
    | expr
    ;

primary
    : INT                       { $$ = NODE(AST_INT, @1); $$->ival = $1; }
    | FLOAT                     { $$ = NODE(AST_FLOAT, @1); $$->fval = $1; }
    | BOOL                      { $$ = NODE(AST_BOOL, @1); $$->ival = $1; }
    | STRING                    { $$ = NODE(AST_STRING, @1); $$->str = $1; }
    | IDENT                     { $$ = NODE(AST_NAME, @1); $$->str = $1; }
    | IDENT '(' args ')'        { $$ = $3; $$->kind = AST_CALL; $$->loc = LOC(@1); $$->str = $1; }
    | '(' expr ')'              { $$ = $2; }
    | '(' expr ',' exprs1 ')'   { diag_error(p->d, LOC(@1), "a list is written in brackets, "
                                             "[a, b], not (a, b)");
                                  $$ = ast_push(p, NODE(AST_LIST, @1), $2);
                                  for (int i = 0; i < $4->n; i++)
                                      ast_push(p, $$, $4->items[i]); }
    | '[' exprs ']'             { $$ = $2; $$->kind = AST_LIST; $$->loc = LOC(@1); }
    ;

exprs
    : %empty                    { $$ = NODE(AST_LIST, @$); }
    | exprs1
    ;

exprs1
    : expr                      { $$ = ast_push(p, NODE(AST_LIST, @1), $1); }
    | exprs1 ',' expr           { $$ = ast_push(p, $1, $3); }
    ;

args
    : %empty                    { $$ = NODE(AST_CALL, @$); }
    | args1
    ;

args1
    : arg                       { $$ = ast_push(p, NODE(AST_CALL, @1), $1); }
    | args1 ',' arg             { $$ = ast_push(p, $1, $3); }
    ;

arg
    : expr
    | IDENT '=' expr            { $$ = NODE(AST_KWARG, @1); $$->str = $1; $$->a = $3; }
    ;

%%

static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner, fe_parse_state *p)
{
    (void)scanner;
    char msg[256];
    int len = 0;
    yysymbol_kind_t got = yypcontext_token(ctx);
    yysymbol_kind_t want[4];
    int nwant = yypcontext_expected_tokens(ctx, want, 4);
    if (got == YYSYMBOL_YYEOF)
        len = snprintf(msg, sizeof msg, "unexpected end of file");
    else
        len = snprintf(msg, sizeof msg, "unexpected %s", yysymbol_name(got));
    for (int i = 0; i < nwant && nwant < 4 && len < (int)sizeof msg; i++)
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s", i == 0 ? ", expected " :
                        i == nwant - 1 ? " or " : ", ", yysymbol_name(want[i]));
    const YYLTYPE *l = yypcontext_location(ctx);
    diag_error(p->d, (ir_loc){p->file, l->first_line, l->first_column}, "%s", msg);
    return 0;
}

/* With parse.error custom, bison calls yyerror only when its stack of YYMAXDEPTH
 * (10000) entries is full: brackets or operators nested thousands deep. */
static void yyerror(const YYLTYPE *l, yyscan_t scanner, fe_parse_state *p, const char *msg)
{
    (void)scanner;
    (void)msg;
    diag_error(p->d, (ir_loc){p->file, l->first_line, l->first_column},
               "nesting too deep for the parser (its stack holds %d levels)", YYMAXDEPTH);
}

ast *fe_parse(fe_parse_state *p, const char *text, size_t len)
{
    yyscan_t scanner;
    if (yylex_init_extra(p, &scanner))
        return NULL;
    int before = p->d->nerrors;
    p->line = 1;
    p->col = 1;
    p->depth = 0;
    p->program = NULL;
    YY_BUFFER_STATE buf = yy_scan_bytes(text, (int)len, scanner);
    int rc = yyparse(scanner, p);
    yy_delete_buffer(buf, scanner);
    yylex_destroy(scanner);
    if (rc != 0 || p->d->nerrors > before)
        return NULL;
    return p->program;
}
