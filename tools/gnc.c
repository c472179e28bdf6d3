/* gnc: the command-line driver.  Each subcommand is a short function over the
 * stages: load (frontend or IR text) -> verify -> print / summarize / execute. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base.h"
#include "codegen.h"
#include "cuda.h"
#include "device.h"
#include "diag.h"
#include "exec.h"
#include "frontend.h"
#include "ir.h"
#include "npy.h"
#include "passes.h"
#include "plan.h"
#include "session.h"
#include "cli.h"
#include "plot.h"
#include "gnc_commit.h"

extern char **environ;

static const char usage_main[] =
    "usage: gnc <command> [options] FILE\n"
    "\n"
    "Lowers .net model descriptions to graph IR and runs them.\n"
    "\n"
    "commands:\n"
    "  dump     print the elaborated graph IR as text\n"
    "  compile  parse, elaborate and check shapes; print a one-screen summary;\n"
    "           with -o FILE.gnc, write the compiled program as a plan file\n"
    "  run      run inference (--device cpu or cuda) on random or given .npy inputs\n"
    "  train    train a model on a data set (IDX, .npy, safetensors, tokens)\n"
    "  eval     test accuracy of trained weights\n"
    "  export   write a model and its weights as an ONNX file\n"
    "  inspect  print what a plan file holds\n"
    "  plot     draw training logs (gnc train --log) as an SVG picture\n"
    "  devices  list the GPUs the CUDA driver sees\n"
    "  help     show help for a command\n"
    "\n"
    "FILE is a model (.net), IR text (.gir, as written by gnc dump) or, for run,\n"
    "train, eval, dump and inspect, a plan (.gnc, as written by gnc compile -o).\n"
    "Under mpirun -np N, train, run and compile run a program of N devices, one per\n"
    "rank (docs/partition.md, \"Running under MPI\").\n"
    "Run 'gnc <command> --help' for a command's options.  Documentation: docs/.\n";

/* Each command's help: its usage line and what it does, then its options
 * (from flags[], below, so that the help lists exactly what the parser
 * takes), then notes. */
static const struct command {
    const char *name;
    const char *about;
    const char *notes;
} commands[] = {
    {"dump",
     "usage: gnc dump [options] FILE\n"
     "\n"
     "Prints the graph IR of FILE (docs/ir.md).  The text parses back: 'gnc dump x.gir'\n"
     "prints it again unchanged.\n",
     NULL},
    {"compile",
     "usage: gnc compile [options] FILE\n"
     "\n"
     "Parses and elaborates FILE, checks every shape, runs the passes, plans the\n"
     "memory and prints a summary: inputs, outputs, parameters, operations, FLOPs,\n"
     "and the planned arena against its lower bound (docs/passes.md).\n",
     NULL},
    {"run",
     "usage: gnc run [options] FILE\n"
     "\n"
     "Runs inference (batchnorm with running statistics, no dropout) and prints each\n"
     "output.  Inputs are random unless given: floating-point inputs are uniform in\n"
     "[0, 1), integer ones below the class count of a loss that reads them as labels\n"
     "(the rows of an embedding that reads them as indices), else in [0, 10).\n",
     "FILE may be a plan (gnc compile -o): it runs as compiled, on as many virtual\n"
     "devices as it was compiled for; options that shape a program do not apply.\n"},
    {"train",
     "usage: gnc train [options] MODEL.net\n"
     "\n"
     "Trains the model on --device: each step runs the training graph (gnc dump --train)\n"
     "on a shuffled batch; after each epoch, test accuracy on the whole test set.\n"
     "The model's first float input takes the images, its integer input the labels.\n"
     "Ctrl-C stops after the step, with a checkpoint and the command that resumes.\n",
     "MODEL may be a training plan (gnc compile MODEL.net --train -o FILE.gnc): it\n"
     "trains as compiled (batch, optimizer, devices); each epoch ends with its\n"
     "training loss, as a plan holds no inference program to test with (gnc eval\n"
     "takes an inference plan and the checkpoint).\n"},
    {"eval",
     "usage: gnc eval [options] MODEL.net\n"
     "\n"
     "Test accuracy and loss of the weights in a checkpoint, in inference mode.\n",
     "MODEL may be an inference plan (gnc compile -o), at the batch it was compiled for.\n"},
    {"export",
     "usage: gnc export [options] MODEL -o FILE.onnx\n"
     "\n"
     "Writes the model (.net or .gir) as an ONNX file (opset 17) that other runtimes\n"
     "and Netron open: its inputs, outputs and inference graph (the loss and the\n"
     "inputs only the loss reads are left out), its parameters and buffers as\n"
     "initializers with their values.  An op with no exact ONNX form is an error that\n"
     "names the node, and nothing is written (docs/onnx.md).\n",
     NULL},
    {"inspect",
     "usage: gnc inspect FILE.gnc [--json]\n"
     "\n"
     "Checks a plan file (gnc compile -o; docs/plan.md) as gnc run would and prints\n"
     "what it holds: its sections, the flags it was compiled with, each device's\n"
     "arena and holdings, the inputs, outputs and parameters (with initializers),\n"
     "each device's collectives and transfers with their bytes, and its kernels.\n"
     "An invalid plan gives an error saying what is wrong, and exit status 1.\n",
     NULL},
    {"plot",
     "usage: gnc plot LOG... -o FILE.svg|FILE.png\n"
     "\n"
     "Draws training runs side by side: train loss and test loss per epoch in one\n"
     "panel, test accuracy in another, a color per run.  Each LOG is a log of gnc\n"
     "train --log (CSV or JSON lines; --log-every rows between the epochs' ends) or\n"
     "the JSON lines of ../shared/bench/torch_fmnist.py (docs/train.md, \"Curves\").\n",
     NULL},
    {"devices",
     "usage: gnc devices\n"
     "\n"
     "Lists the GPUs the CUDA driver sees: name, compute capability, multiprocessors,\n"
     "memory (and how much is free), the driver's CUDA version.  Exit status 1, with\n"
     "the reason, where the driver does not load or sees no GPU.\n",
     NULL},
};

/* The sections of a command's options in its help. */
enum { SEC_MAIN, SEC_STEP, SEC_PART, SEC_GPU, SEC_MODEL, NSECTIONS };
static const char *const section_title[NSECTIONS] = {
    "options", "the training step", "partitioning (docs/partition.md)",
    "CUDA kernels (where gnc has NVRTC; docs/codegen.md)", "the model"};

/* The flags: the commands each applies to, whether it takes a value (2: an
 * optional one, as --flag=VALUE), its value as the help shows it (with the
 * space or '=' before it), its help and its section.  A flag may have an
 * entry per group of commands, with help of its own. */
static const struct flag {
    const char *name;
    const char *cmds;
    int valued;
    const char *arg;
    const char *help;
    int section;
} flags[] = {
    {"-D", "dump compile run train eval export", 1, " NAME=VALUE",
     "set a model parameter (repeatable): -D batch=32", SEC_MODEL},
    {"--model", "dump compile run train eval export", 1, " NAME",
     "the model to use when the file holds several (default: the last)", SEC_MODEL},
    {"--loss", "dump compile run train eval", 1, " cross_entropy:OUTPUT|mse:OUTPUT",
     "add a loss on the model's output OUTPUT, its target a new input 'label' (an imported "
     "ONNX model has none): what gnc train needs", SEC_MODEL},
    {"-o", "dump", 1, " FILE", "write to FILE (atomically) instead of standard output; with "
     "--format dot, FILE.svg, .png or .pdf is drawn by Graphviz's dot", SEC_MAIN},
    {"--format", "dump", 1, " ir|dot",
     "ir: the IR text (default); dot: a Graphviz graph of the nodes, fused kernels and, "
     "partitioned, devices with what passes between them", SEC_MAIN},
    {"-o", "compile", 1, " FILE.gnc",
     "write the compiled program, its memory plan and its flags as a plan file "
     "(docs/plan.md), atomically ('-': to standard output); gnc run, train and the "
     "embedding library (docs/api.md) run it.  Where gnc has NVRTC the plan also holds "
     "the CUDA kernels (below)", SEC_MAIN},
    {"-o", "run", 1, " DIR",
     "write each output to DIR/NAME.npy and the loss to DIR/loss.npy (making DIR)", SEC_MAIN},
    {"--seed", "run", 1, " N",
     "seed of the parameter initializers and random inputs (default 0)", SEC_MAIN},
    {"--seed", "train", 1, " N", "initializers, shuffling and dropout (default 0)", SEC_MAIN},
    {"-o", "export", 1, " FILE.onnx", "the ONNX file to write, atomically (required)", SEC_MAIN},
    {"-o", "plot", 1, " FILE.svg|FILE.png", "the picture to write, atomically (required); a "
     "PNG is drawn by librsvg's rsvg-convert (Debian: librsvg2-bin)", SEC_MAIN},
    {"--name", "plot", 1, " NAME", "the legend's name of the next LOG (default: its file "
     "name without the folder); repeatable", SEC_MAIN},
    {"--seed", "export", 1, " N",
     "seed of the initializers whose draw is exported without --weights (default 0)", SEC_MAIN},
    {"--weights", "export", 1, " FILE",
     "export the weights of this checkpoint (gnc train --checkpoint, or any safetensors file "
     "with every parameter and buffer) instead of the initializers' draw", SEC_MAIN},
    {"--batch", "export", 1, " N", "batch size: sets -D batch=N (default: the model's)",
     SEC_MAIN},
    {"--input", "run", 1, " [NAME=]FILE.npy",
     "read an input from a .npy file ('-': standard input; NAME may be left out when the "
     "model has one input); repeatable", SEC_MAIN},
    {"--repeat", "run", 1, " N", "run N times and report the median time (default 1)",
     SEC_MAIN},
    {"--data", "train", 1, " PATH",
     "a folder or a file (default /usr/share/datasets/fashion-mnist): IDX files (train-*, t10k-*; "
     ".gz or not), or arrays named by the model's inputs: a folder of NAME.npy (or its "
     "train/ and test/ subfolders), or a safetensors file (NAME, train.NAME, test.NAME); "
     "docs/train.md", SEC_MAIN},
    {"--tokens", "train eval", 1, " FILE",
     "a token stream for a model with inputs tokens and next [batch, seq]: a text file "
     "(a token per byte) or a .npy of integer ids [N], cut into windows of seq + 1", SEC_MAIN},
    {"--test-fraction", "train eval", 1, " X",
     "the last X of the samples (or of the token stream) is the test set where the data "
     "has no test split of its own (default 0.1)", SEC_MAIN},
    {"--weights", "eval", 1, " FILE", "a checkpoint written by gnc train (required)",
     SEC_MAIN},
    {"--weights", "compile", 1, " FILE",
     "with -o: the plan carries the weights of this checkpoint, which gnc run, train and "
     "libgnc start from instead of the initializers", SEC_MAIN},
    {"--weights", "train", 1, " FILE",
     "start at step 0 from the weights of a checkpoint (another run's, whose optimizer "
     "state is left out) or of a PyTorch state_dict saved as safetensors, names as gnc's",
     SEC_MAIN},
    {"--weights", "run", 1, " FILE",
     "start from the weights of a checkpoint (gnc train --checkpoint, or any safetensors file "
     "with every parameter and buffer) instead of the initializers", SEC_MAIN},
    {"--data", "eval", 1, " PATH",
     "as train's: IDX files (t10k-*), or named arrays whose test split is evaluated "
     "(default /usr/share/datasets/fashion-mnist)", SEC_MAIN},
    {"--epochs", "train", 1, " N", "epochs (default 1)", SEC_MAIN},
    {"--steps", "train", 1, " N", "N steps in all, over as many epochs as they take (with "
     "--epochs: whichever ends first)",
     SEC_MAIN},
    {"--batch", "train", 1, " N", "batch size: sets -D batch=N (default: the model's)",
     SEC_MAIN},
    {"--batch", "eval", 1, " N",
     "images per step (default: the largest divisor of the test set up to 256)", SEC_MAIN},
    {"--lr", "train", 1, " X", "learning rate (default 0.1)", SEC_MAIN},
    {"--schedule", "train", 1, " constant|step|cosine",
     "learning-rate schedule (default constant)", SEC_MAIN},
    {"--step-size", "train", 1, " N", "step schedule: epochs between decays (default 1)",
     SEC_MAIN},
    {"--gamma", "train", 1, " X", "step schedule: decay factor (default 0.1)", SEC_MAIN},
    {"--warmup", "train", 1, " N", "linear warm-up over the first N steps (default 0)",
     SEC_MAIN},
    {"--checkpoint", "train", 1, " FILE",
     "save a safetensors checkpoint after each epoch, at the end and at Ctrl-C", SEC_MAIN},
    {"--resume", "train", 1, " FILE", "continue from a checkpoint, exactly where it stopped",
     SEC_MAIN},
    {"--log", "train", 1, " FILE.csv|FILE.jsonl",
     "a row per epoch: epoch,steps,train_loss,test_acc,test_loss,images_per_s,seconds",
     SEC_MAIN},
    {"--log-every", "train", 1, " N", "a --log row every N steps too", SEC_MAIN},
    {"--plot", "train", 1, " FILE.svg|FILE.png",
     "draw train loss, test loss and test accuracy per epoch (and per --log-every row) as "
     "an SVG picture (PNG drawn by rsvg-convert), redrawn as training runs: at each epoch's end, at most once a second "
     "between, and at the end (gnc plot draws logs)",
     SEC_MAIN},
    {"--threads", "run train eval", 1, " N", "CPU threads (default: all cores)", SEC_MAIN},
    {"--profile", "run", 2, "[=FILE.json]",
     "print the time spent in each op; with FILE, also each kernel's measured times as a "
     "Chrome trace (Perfetto, chrome://tracing).  On cuda FILE alone: each step's GPU time "
     "between CUDA events, every run launched step by step (a CUDA graph's nodes cannot be "
     "timed one by one)", SEC_MAIN},
    {"--profile", "train", 2, "[=FILE.json]",
     "print the time spent in each op of the training step; with FILE, also each kernel's "
     "measured times, every step, as a Chrome trace.  On cuda FILE alone: each GPU step "
     "between CUDA events, launched step by step (no CUDA graph)", SEC_MAIN},
    {"--trace", "compile", 1, " FILE.json",
     "write the predicted step (the cost model's schedule: a track per device and stream, "
     "each kernel and communication with its time and bytes) as a Chrome trace", SEC_MAIN},
    {"--device", "run", 1, " cpu|cuda",
     "where to run (default cuda where a GPU is present, else cpu); a model runs on cuda "
     "as the plan gnc compile -o makes of it (compiled in memory)", SEC_MAIN},
    {"--device", "train", 1, " cpu|cuda",
     "where to train (default cuda where a GPU is present, else cpu); parameters and "
     "optimizer state stay on the GPU and are read back for evaluation and checkpoints",
     SEC_MAIN},
    {"--device", "eval", 1, " cpu|cuda",
     "where to evaluate (default cuda where a GPU is present, else cpu)", SEC_MAIN},
    {"--share-gpus", "run train eval", 0, "",
     "cuda: run a plan of more devices than this machine has GPUs, device d on GPU d mod "
     "the count (their collectives copies on the GPU instead of NCCL; for tests, slower "
     "than a plan compiled for the GPUs present); without it such a plan is an error",
     SEC_MAIN},
    {"--eager", "run train eval", 0, "",
     "cuda: launch step by step instead of replaying a CUDA graph (also GNC_CUDA_EAGER=1; "
     "docs/runtime.md)", SEC_MAIN},
    {"--timeout", "run train eval", 1, " S",
     "give up after S seconds waiting for another device (a virtual device, an MPI rank, "
     "a GPU's NCCL call): the run fails, naming the op and whom it waited for "
     "(default 300)", SEC_MAIN},
    {"--passes", "dump compile run train eval", 1, "=LIST",
     "passes to run, comma-separated (dump: none unless given; else simplify,fold_bn,"
     "schedule,fuse, and for a training step simplify,schedule,fuse); passes: simplify "
     "fold cse dce fold_bn schedule fuse remat attention", SEC_MAIN},
    {"--dump-ir", "compile", 1, "=all|before:PASS|after:PASS", "print the IR there",
     SEC_MAIN},
    {"--dump-dir", "compile", 1, " DIR", "write those dumps to DIR/NN-when-pass.gir",
     SEC_MAIN},
    {"--verify-each", "compile run train eval", 0, "", "run the IR verifier after every pass",
     SEC_MAIN},
    {"--time-passes", "compile", 0, "", "each pass's time and changes", SEC_MAIN},
    {"--dump-memory", "compile", 2, "[=FILE.json|FILE.svg]",
     "the memory plan: every buffer's offset, size and live range; with FILE, as JSON or "
     "as a picture of each arena over the step, its lower bound a line (and the summary "
     "printed)", SEC_MAIN},
    {"--stats", "compile", 0, "",
     "key: value lines for scripts (ops, fused_nodes, kernels, memory.*, params.bytes, "
     "compile_ms)", SEC_MAIN},
    {"--dump-plan", "compile", 2, "[=FILE.json]",
     "the partition plan: per device its ops, memory, predicted time and communication "
     "(JSON into FILE; '-': standard output)", SEC_MAIN},
    {"--json", "inspect", 0, "",
     "instead, per device what one run asks of the GPU, as JSON: graph nodes, steps, "
     "kernel launches, library calls, communication, copies and their bytes, bytes "
     "kernels read and write, the smallest grid among kernels over 1M elements", SEC_MAIN},
    {"--json", "compile", 0, "",
     "instead, the summary and what --stats gives as one JSON object on standard output "
     "(docs/cli.md, \"Machine-readable output\"); not with --dump-memory or --dump-plan "
     "without a file", SEC_MAIN},
    {"--json", "run", 0, "",
     "instead, one JSON object: each output whole (dtype, shape, every value), the loss, "
     "the median time; not with --profile", SEC_MAIN},
    {"--json", "eval", 0, "", "instead, one JSON object: accuracy, loss, images", SEC_MAIN},
    {"--remat", "compile", 0, "",
     "with --train: recompute batchnorm-ReLU results in the backward pass; reports the "
     "memory saved and the FLOPs added", SEC_STEP},
    {"--remat", "train", 0, "", "recompute batchnorm-ReLU results in the backward pass",
     SEC_STEP},
    {"--train", "dump compile", 0, "",
     "the training step: forward in training mode, backward, and the optimizer's update",
     SEC_STEP},
    {"--optimizer", "dump compile train", 1, " sgd|adam|adamw", "the optimizer (default sgd)",
     SEC_STEP},
    {"--momentum", "dump compile train", 1, " M", "SGD momentum (default 0)", SEC_STEP},
    {"--nesterov", "dump compile train", 0, "", "SGD with Nesterov momentum", SEC_STEP},
    {"--weight-decay", "dump compile train", 1, " W", "weight decay (default 0; AdamW 0.01)",
     SEC_STEP},
    {"--gpus", "dump compile", 1, " N", "compile for N GPUs (cost model h100-nvlink)",
     SEC_PART},
    {"--devices", "dump compile run train", 1, " cpu:N",
     "run on N virtual CPU devices, a thread each (cost model cpu); under mpirun -np N, "
     "N devices, a process each", SEC_PART},
    {"--strategy", "dump compile run train", 1,
     " data|zero1|zero2|zero3|pipeline|tensor|hybrid:dp=A,pp=B|auto",
     "(default auto: of those that fit every device, the simplest predicted within the cost "
     "model's error of the fastest); zeroN: data "
     "parallelism with ZeRO stage N (optimizer state; and gradients; and parameters sharded "
     "over the devices)", SEC_PART},
    {"--accumulate", "dump compile run train", 1, " N",
     "gradient accumulation: N microbatches per optimizer step, one after another (pipeline: "
     "N times its microbatches); one gradient exchange per step", SEC_PART},
    {"--microbatches", "dump compile run train", 1, " N",
     "pipeline: microbatches per step (default 2 per stage)", SEC_PART},
    {"--pipeline-schedule", "dump compile run train", 1, " 1f1b|gpipe", "(default 1f1b)",
     SEC_PART},
    {"--bucket-mb", "dump compile run train", 1, " X",
     "data: gradient all-reduce buckets of X MiB (default 25)", SEC_PART},
    {"--sync-bn", "dump compile run train", 0, "",
     "data: batchnorm statistics over the whole batch", SEC_PART},
    {"--recompute", "dump compile run train", 1, " none|selective|full",
     "a training step computes forward results again in its backward pass rather than "
     "keeping them: selective all but the GEMMs' and attention's, full each layer's forward "
     "pass from its input (default none; --strategy auto tries more where a strategy does "
     "not fit)", SEC_PART},
    {"--sequence-parallel", "dump compile run train", 0, "",
     "tensor: activations outside the split layers divided along the sequence (axis 1), "
     "reduce-scattered and all-gathered in place of all-reduced (Megatron-LM)", SEC_PART},
    {"--deterministic", "dump compile run train", 0, "",
     "data: bitwise the same for every device count dividing the micro-shards", SEC_PART},
    {"--micro-shards", "dump compile run train", 1, " N",
     "--deterministic: micro-shards of the batch (default 8)", SEC_PART},
    {"--mem-cap", "compile run train", 1, " SIZE|D=SIZE,...",
     "memory per device (default: the device model's)", SEC_PART},
    {"--device-model", "compile run train", 1, " h200|h100-nvlink|h100-pcie|cpu[,key=value...]",
     "the cost model", SEC_PART},
    {"--precision", "compile", 1, " fp32|tf32|bf16|fp16",
     "the kernels' arithmetic (default fp32)", SEC_GPU},
    {"--precision", "train eval", 1, " fp32|tf32|bf16|fp16",
     "cuda: the kernels' arithmetic (default fp32; as for gnc compile)", SEC_GPU},
    {"--conv", "compile", 1, " cudnn|igemm|cudnn-nhwc|auto",
     "convolutions as cuDNN calls (the default), as generated implicit-GEMM kernels "
     "(tensor cores but at fp32), as cuDNN calls on channels-last (NHWC) copies, or each "
     "the fastest of the three on this machine's GPU (auto, with --autotune)", SEC_GPU},
    {"--conv", "train eval", 1, " cudnn|igemm|cudnn-nhwc",
     "cuda: the convolutions' way (default cudnn; as for gnc compile)", SEC_GPU},
    {"--layout", "compile train eval", 1, " auto|nchw|nhwc",
     "how 4-d activations are stored on the GPU: auto (the default) is channels-last (NHWC) "
     "in bf16 and fp16 programs whose convolutions are cuDNN calls, NCHW elsewhere; inputs, "
     "outputs and parameters stay NCHW", SEC_GPU},
    {"--arch", "compile", 1, " LIST",
     "the cubins the plan holds, as sm_80,sm_90 (the default), and the PTX of the newest",
     SEC_GPU},
    {"--no-kernels", "compile", 0, "", "no CUDA kernels in the plan", SEC_GPU},
    {"--autotune", "compile", 0, "",
     "time each cuBLASLt and cuDNN call's candidate algorithms on this machine's GPU and "
     "record the fastest in the plan (the default asks the libraries' heuristics at load, "
     "untimed)", SEC_GPU},
};

#define NFLAGS (sizeof flags / sizeof flags[0])

static int applies(const struct flag *f, const char *cmd)
{
    size_t n = strlen(cmd);
    for (const char *p = f->cmds; (p = strstr(p, cmd)); p += n)
        if ((p == f->cmds || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

/* Prints text from column `col` on, wrapped at 80 columns with an indent of
 * 18. */
static void print_wrapped(FILE *f, const char *text, int col)
{
    while (*text) {
        size_t word = strcspn(text, " ");
        if (col > 18 && col + 1 + (int)word > 80) {
            fprintf(f, "\n%18s", "");
            col = 18;
        } else if (col > 18) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)word, text);
        col += (int)word;
        text += word;
        text += strspn(text, " ");
    }
    fputc('\n', f);
}

/* A command's help: about, its flags by section, notes. */
static void print_command_usage(const struct command *c, FILE *f)
{
    fputs(c->about, f);
    int train = strcmp(c->name, "train") == 0;
    for (int s = 0; s < NSECTIONS; s++) {
        int any = 0;
        for (size_t k = 0; k < NFLAGS; k++) {
            const struct flag *fl = &flags[k];
            int sec = train && fl->section == SEC_STEP ? SEC_MAIN : fl->section;
            if (sec != s || !applies(fl, c->name))
                continue;
            if (!any++)
                fprintf(f, "\n%s:\n", section_title[s]);
            int col = fprintf(f, "  %s%s", fl->name, fl->arg);
            if (col <= 17)
                col += fprintf(f, "%*s", 18 - col, "");
            else
                col = 80; /* the help on the next line */
            print_wrapped(f, fl->help, col);
        }
        if (s == SEC_MAIN && !any++)
            fputs("\noptions:\n", f);
        if (s == SEC_MAIN)
            fputs("  -h, --help      show this help\n", f);
    }
    if (c->notes)
        fprintf(f, "\n%s", c->notes);
}

static const struct command *command_named(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* Text as troff takes it: backslashes escaped, a line that would start with
 * a control character guarded, '-' as \- in options (man's minus). */
static void man_text(FILE *f, const char *text, int option)
{
    for (const char *p = text; *p; p++) {
        if ((p == text || p[-1] == '\n') && (*p == '.' || *p == '\''))
            fputs("\\&", f);
        if (*p == '\\')
            fputs("\\e", f);
        else if (*p == '-' && option)
            fputs("\\-", f);
        else
            fputc(*p, f);
    }
}

/* gnc help --man: the manual page gnc.1, from the same commands and flags as
 * the help (the build installs it). */
static void print_man(FILE *f)
{
    fprintf(f, ".TH GNC 1 \"\" \"gnc %s\" \"User Commands\"\n.SH NAME\n"
            "gnc \\- lower model descriptions to graph IR, compile, run and train them\n"
            ".SH SYNOPSIS\n.B gnc\n.I command\n[\\fIoptions\\fR]\n.I FILE\n"
            ".SH DESCRIPTION\n.nf\n", GNC_VERSION);
    man_text(f, strchr(usage_main, '\n') + 2, 0); /* after the usage line */
    fputs(".fi\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        const struct command *c = &commands[i];
        fprintf(f, ".SH GNC %s\n.nf\n", c->name);
        man_text(f, c->about, 0);
        fputs(".fi\n", f);
        for (size_t k = 0; k < NFLAGS; k++) {
            if (!applies(&flags[k], c->name))
                continue;
            fputs(".TP\n.B ", f);
            man_text(f, flags[k].name, 1);
            if (*flags[k].arg) {
                fputs("\\fI", f);
                man_text(f, flags[k].arg, 0);
                fputs("\\fR", f);
            }
            fputc('\n', f);
            man_text(f, flags[k].help, 0);
            fputc('\n', f);
        }
        if (c->notes) {
            fputs(".PP\n", f);
            man_text(f, c->notes, 0);
        }
    }
    fputs(".SH EXIT STATUS\n0: success; 1: the file has errors, cannot be read, or running it "
          "failed; 2: a usage error; 130: gnc train stopped by Ctrl-C or SIGTERM after its "
          "checkpoint.\n.SH SEE ALSO\nThe documentation installed with gnc (share/doc/gnc): "
          "cli.md for this command, dsl.md for models, ir.md, plan.md, partition.md, api.md.\n",
          f);
}

static void print_usage(const char *cmd, FILE *f)
{
    const struct command *c = cmd ? command_named(cmd) : NULL;
    if (c)
        print_command_usage(c, f);
    else
        fputs(usage_main, f);
}

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "gnc: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see 'gnc %s--help')\n", cmd ? cmd : "");
    return 2;
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v > max)
        return 0;
    *out = v;
    return 1;
}

static int parse_number(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi))
        return 0;
    *out = v;
    return 1;
}

/* Parses argv after the command; returns 0, 1 after --help, or 2 on a bad flag. */
/* The model, its inputs and the run: defines, files, seeds, threads, the
 * device.  Each of the five *_flag: 0 when it took the flag, 1 when the flag
 * is another's, else usage_error's status. */
static int run_flag(options *o, const char *cmdsp, const char *name, const char *val)
{
    unsigned long long u;
    if (strcmp(name, "-D") == 0) {
        const char *eq = strchr(val, '=');
        if (!eq || eq == val)
            return usage_error(cmdsp, "-D needs NAME=VALUE, got '%s'", val);
        if (o->c.ndefines == MAX_DEFINES)
            return usage_error(cmdsp, "too many -D options%s", "");
        o->c.define_names[o->c.ndefines] = strndup(val, (size_t)(eq - val));
        o->c.define_values[o->c.ndefines++] = eq + 1;
    } else if (strcmp(name, "--model") == 0) {
        o->c.model = val;
    } else if (strcmp(name, "--format") == 0) {
        if (strcmp(val, "ir") != 0 && strcmp(val, "dot") != 0)
            return usage_error(cmdsp, "--format needs ir or dot, got '%s'", val);
        o->dot = strcmp(val, "dot") == 0;
    } else if (strcmp(name, "--loss") == 0) {
        o->c.loss = val;
    } else if (strcmp(name, "-o") == 0) {
        o->out = val;
    } else if (strcmp(name, "--seed") == 0) {
        if (!parse_uint(val, ~0ull, &o->seed))
            return usage_error(cmdsp, "--seed needs a non-negative integer, got '%s'", val);
        o->seed_given = 1;
    } else if (strcmp(name, "--threads") == 0) {
        if (!parse_uint(val, 1024, &u) || u < 1)
            return usage_error(cmdsp, "--threads needs an integer from 1 to 1024, got '%s'", val);
        o->threads = (int)u;
    } else if (strcmp(name, "--repeat") == 0) {
        if (!parse_uint(val, 100000, &u) || u < 1)
            return usage_error(cmdsp, "--repeat needs a positive integer, got '%s'", val);
        o->repeat = (int)u;
    } else if (strcmp(name, "--input") == 0) {
        if (o->ninputs == MAX_INPUTS)
            return usage_error(cmdsp, "too many --input options%s", "");
        const char *eq = strchr(val, '=');
        o->input_names[o->ninputs] = eq ? strndup(val, (size_t)(eq - val)) : NULL;
        o->input_files[o->ninputs++] = eq ? eq + 1 : val;
    } else if (strcmp(name, "--train") == 0) {
        o->c.train = 1;
    } else if (strcmp(name, "--profile") == 0) {
        o->profile = 1;
        o->profile_file = *val ? val : NULL;
    } else if (strcmp(name, "--trace") == 0) {
        o->trace_file = val;
    } else if (strcmp(name, "--eager") == 0) {
        o->eager = 1;
    } else if (strcmp(name, "--share-gpus") == 0) {
        o->share_gpus = 1;
    } else if (strcmp(name, "--timeout") == 0) {
        double t;
        if (!parse_number(val, 0, 1e6, &t) || t <= 0)
            return usage_error(cmdsp, "--timeout needs a number of seconds above 0, up to "
                               "1000000, got '%s'", val);
        o->timeout = t;
    } else if (strcmp(name, "--device") == 0) {
        if (strcmp(val, "cpu") != 0 && strcmp(val, "cuda") != 0)
            return usage_error(cmdsp, "--device needs cpu or cuda, got '%s'", val);
        o->device = val;
    } else if (strcmp(name, "--data") == 0) {
        o->data = val;
    } else if (strcmp(name, "--tokens") == 0) {
        o->tokens = val;
    } else if (strcmp(name, "--test-fraction") == 0) {
        if (!parse_number(val, 0, 1, &o->test_fraction) || o->test_fraction >= 1)
            return usage_error(cmdsp, "--test-fraction needs a number in [0, 1), got '%s'", val);
    } else if (strcmp(name, "--weights") == 0) {
        o->weights = val;
    } else {
        return 1;
    }
    return 0;
}

/* What compile runs and shows: the passes, their dumps, statistics. */
static int pass_flag(options *o, const char *cmdsp, const char *name, const char *val)
{
    if (strcmp(name, "--passes") == 0) {
        for (const char *p = val; *p;) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            if (!pass_lookup(p, len))
                return usage_error(cmdsp, "--passes: unknown pass in '%s'", val);
            p += len + (end != NULL);
        }
        o->c.passes = val;
    } else if (strcmp(name, "--dump-ir") == 0) {
        const char *colon = strchr(val, ':');
        if (strcmp(val, "all") != 0 &&
            (!colon || (strncmp(val, "before:", 7) && strncmp(val, "after:", 6)) ||
             (!pass_lookup(colon + 1, strlen(colon + 1)) && strcmp(colon + 1, "input"))))
            return usage_error(cmdsp, "--dump-ir needs all, before:PASS or after:PASS, "
                               "got '%s'", val);
        o->c.dump_ir = val;
    } else if (strcmp(name, "--dump-dir") == 0) {
        o->c.dump_dir = val;
    } else if (strcmp(name, "--verify-each") == 0) {
        o->c.verify_each = 1;
    } else if (strcmp(name, "--time-passes") == 0) {
        o->c.time_passes = 1;
    } else if (strcmp(name, "--dump-memory") == 0) {
        o->dump_memory = 1;
        o->dump_memory_file = *val ? val : NULL;
    } else if (strcmp(name, "--stats") == 0) {
        o->stats = 1;
    } else if (strcmp(name, "--json") == 0) {
        o->json = 1;
    } else if (strcmp(name, "--remat") == 0) {
        o->c.remat = 1;
    } else {
        return 1;
    }
    return 0;
}

/* Training: the optimizer, the learning rate and its schedule, the counts,
 * checkpoints. */
static int training_flag(options *o, const char *cmdsp, const char *name, const char *val)
{
    unsigned long long u;
    if (strcmp(name, "--nesterov") == 0) {
        o->c.opt.nesterov = 1;
    } else if (strcmp(name, "--optimizer") == 0) {
        int k = strcmp(val, "sgd") == 0 ? AD_SGD : strcmp(val, "adam") == 0 ? AD_ADAM
              : strcmp(val, "adamw") == 0 ? AD_ADAMW : -1;
        if (k < 0)
            return usage_error(cmdsp, "--optimizer needs sgd, adam or adamw, got '%s'", val);
        ad_optimizer d = ad_optimizer_default((ad_optimizer_kind)k);
        o->c.opt.kind = d.kind, o->c.opt.beta1 = d.beta1, o->c.opt.beta2 = d.beta2, o->c.opt.eps = d.eps;
    } else if (strcmp(name, "--momentum") == 0) {
        if (!parse_number(val, 0, 1, &o->c.opt.momentum))
            return usage_error(cmdsp, "--momentum needs a number in [0, 1], got '%s'", val);
    } else if (strcmp(name, "--weight-decay") == 0) {
        if (!parse_number(val, 0, 1e3, &o->c.opt.weight_decay))
            return usage_error(cmdsp, "--weight-decay needs a non-negative number, got '%s'", val);
    } else if (strcmp(name, "--lr") == 0) {
        if (!parse_number(val, 0, 1e6, &o->lr) || o->lr <= 0)
            return usage_error(cmdsp, "--lr needs a positive number up to 1e6, got '%s'", val);
    } else if (strcmp(name, "--gamma") == 0) {
        if (!parse_number(val, 0, 1e6, &o->gamma))
            return usage_error(cmdsp, "--gamma needs a non-negative number, got '%s'", val);
    } else if (strcmp(name, "--schedule") == 0) {
        if (strcmp(val, "constant") && strcmp(val, "step") && strcmp(val, "cosine"))
            return usage_error(cmdsp, "--schedule needs constant, step or cosine, got '%s'", val);
        o->schedule = val;
    } else if (strcmp(name, "--checkpoint") == 0) {
        o->checkpoint = val;
    } else if (strcmp(name, "--resume") == 0) {
        o->resume = val;
    } else if (strcmp(name, "--log") == 0) {
        o->log = val;
    } else if (strcmp(name, "--plot") == 0) {
        if (!cli_has_suffix(val, ".svg") && !cli_has_suffix(val, ".png"))
            return usage_error(cmdsp, "--plot %s: the picture is SVG or PNG, a name ending in "
                               ".svg or .png", val);
        o->plot = val;
    } else if (strcmp(name, "--epochs") == 0 || strcmp(name, "--steps") == 0 ||
               strcmp(name, "--batch") == 0 || strcmp(name, "--warmup") == 0 ||
               strcmp(name, "--step-size") == 0 || strcmp(name, "--log-every") == 0) {
        long long *dst = strcmp(name, "--epochs") == 0 ? &o->epochs    /* the counts */
                       : strcmp(name, "--steps") == 0 ? &o->steps
                       : strcmp(name, "--batch") == 0 ? &o->batch
                       : strcmp(name, "--warmup") == 0 ? &o->warmup
                       : strcmp(name, "--log-every") == 0 ? &o->log_every : &o->step_size;
        int zero_ok = dst == &o->warmup;
        if (!parse_uint(val, 1ull << 40, &u) || (u == 0 && !zero_ok))
            return usage_error(cmdsp, zero_ok ? "%s needs a non-negative integer"
                                              : "%s needs a positive integer", name);
        *dst = (long long)u;
    } else {
        return 1;
    }
    return 0;
}

/* Partitioning: devices, the strategy and its settings, memory caps, the
 * device model, the partition plan's dump. */
static int partition_flag(options *o, const char *cmdsp, const char *name, const char *val)
{
    unsigned long long u;
    if (strcmp(name, "--gpus") == 0 || strcmp(name, "--devices") == 0) {
        const char *num = val;
        if (name[2] == 'd') {
            if (strncmp(val, "cpu:", 4) != 0)
                return usage_error(cmdsp, "--devices needs cpu:N (N virtual devices), got '%s'",
                                   val);
            num = val + 4;
        }
        if (!parse_uint(num, IR_MAX_DEVICES, &u) || u < 1)
            return usage_error(cmdsp, name[2] == 'g' ? "--gpus needs a device count, got '%s'"
                                                    : "--devices cpu:N needs a device count N "
                                                      "from 1, got '%s'", val);
        if (o->devices_given && o->c.part.devices != (int)u)
            return usage_error(cmdsp, "--gpus and --devices give different device counts%s", "");
        o->c.part.devices = (int)u;
        o->devices_given = 1;
        o->c.gpus |= name[2] == 'g';
    } else if (strcmp(name, "--strategy") == 0) {
        if (drv_set_strategy(&o->c, val) != 0)
            return usage_error(cmdsp, "--strategy needs data, zero1, zero2, zero3, pipeline, "
                               "tensor, hybrid:dp=A,pp=B or auto, got '%s'", val);
    } else if (strcmp(name, "--pipeline-schedule") == 0) {
        if (strcmp(val, "1f1b") && strcmp(val, "gpipe"))
            return usage_error(cmdsp, "--pipeline-schedule needs 1f1b or gpipe, got '%s'", val);
        o->c.part.schedule = strcmp(val, "gpipe") == 0 ? PT_GPIPE : PT_1F1B;
    } else if (strcmp(name, "--bucket-mb") == 0) {
        double mb;
        if (!parse_number(val, 0, 1e6, &mb) || mb <= 0)
            return usage_error(cmdsp, "--bucket-mb needs a positive number of MiB, got '%s'", val);
        o->c.part.bucket_bytes = (int64_t)(mb * 1048576.0);
        if (o->c.part.bucket_bytes < 1)
            o->c.part.bucket_bytes = 1;
    } else if (strcmp(name, "--dump-plan") == 0) {
        o->dump_plan = 1;
        o->dump_plan_file = *val ? val : NULL;
    } else if (strcmp(name, "--mem-cap") == 0) {
        char e[256];
        if (cli_parse_mem_cap(val, o, e, sizeof e) != 0)
            return usage_error(cmdsp, "%s", e);
    } else if (strcmp(name, "--device-model") == 0) {
        cost_device dev;
        char e[256];
        if (cost_device_parse(val, &dev, e, sizeof e) != 0)
            return usage_error(cmdsp, "--device-model: %s", e);
        o->c.device_model = val;
    } else if (strcmp(name, "--sync-bn") == 0) {
        o->c.part.sync_bn = 1;
    } else if (strcmp(name, "--sequence-parallel") == 0) {
        o->c.part.sequence_parallel = 1;
    } else if (strcmp(name, "--recompute") == 0) {
        if (strcmp(val, "none") == 0)
            o->c.part.recompute = PT_RECOMPUTE_NONE;
        else if (strcmp(val, "selective") == 0)
            o->c.part.recompute = PT_RECOMPUTE_SELECTIVE;
        else if (strcmp(val, "full") == 0)
            o->c.part.recompute = PT_RECOMPUTE_FULL;
        else
            return usage_error(cmdsp, "--recompute takes none, selective or full, not '%s'", val);
    } else if (strcmp(name, "--deterministic") == 0) {
        o->c.part.deterministic = 1;
    } else if (strcmp(name, "--accumulate") == 0) {
        if (!parse_uint(val, 64, &u) || u < 1)
            return usage_error(cmdsp, "--accumulate needs an integer from 1 to 64, got '%s'", val);
        o->c.part.accumulate = (int)u;
    } else if (strcmp(name, "--microbatches") == 0 || strcmp(name, "--micro-shards") == 0) {
        if (!parse_uint(val, 64, &u) || u < 1)
            return usage_error(cmdsp, "%s needs an integer from 1 to 64", name);
        *(name[7] == 'b' ? &o->c.part.microbatches : &o->c.part.micro_shards) = (int)u;
    } else {
        return 1;
    }
    return 0;
}

/* The CUDA program: precision, convolutions, architectures, kernels,
 * autotuning. */
static int codegen_flag(options *o, const char *cmdsp, const char *name, const char *val)
{
    if (strcmp(name, "--precision") == 0) {
        if (ir_precision_lookup(val) < 0)
            return usage_error(cmdsp, "--precision needs fp32, tf32, bf16 or fp16, got '%s'",
                               val);
        o->c.precision = ir_precision_lookup(val);
    } else if (strcmp(name, "--conv") == 0) {
        o->c.conv_auto = strcmp(val, "auto") == 0;
        if (cg_conv_lookup(val) < 0 && !o->c.conv_auto)
            return usage_error(cmdsp, "--conv needs cudnn, igemm, cudnn-nhwc or auto, "
                               "got '%s'", val);
        o->c.conv = o->c.conv_auto ? CG_CONV_CUDNN : cg_conv_lookup(val);
    } else if (strcmp(name, "--layout") == 0) {
        if (cg_layout_lookup(val) < 0)
            return usage_error(cmdsp, "--layout needs auto, nchw or nhwc, got '%s'", val);
        o->c.layout = cg_layout_lookup(val);
    } else if (strcmp(name, "--arch") == 0) {
        char archs[CG_MAX_ARCHS][16];
        if (rt_plan_archs(val, archs) < 0)
            return usage_error(cmdsp, "--arch needs 1 to 8 distinct architectures as "
                               "sm_80,sm_90, got '%s'", val);
        o->c.archs = val;
    } else if (strcmp(name, "--no-kernels") == 0) {
        o->c.no_kernels = 1;
    } else if (strcmp(name, "--autotune") == 0) {
        o->c.autotune = 1;
    } else {
        return 1;
    }
    return 0;
}

/* An option no entry of flags[] names: a usage error, with the nearest name
 * of the command's options (or of any command's) as a suggestion. */
static int unknown_option(const char *cmd, const char *a)
{
    const char *names[NFLAGS], *s = NULL;
    char typed[64];
    snprintf(typed, sizeof typed, "%.*s", (int)strcspn(a, "="), a);
    for (int pass = 0; pass < 2 && !s; pass++) {
        int n = 0;
        for (size_t k = 0; k < NFLAGS; k++)
            if (pass || applies(&flags[k], cmd))
                names[n++] = flags[k].name;
        s = diag_suggest(typed, names, n);
    }
    fprintf(stderr, "gnc: error: unknown option '%s'%s%s%s\n(see 'gnc %s --help')\n", a,
            s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "", cmd);
    return 2;
}

static int parse_args(int argc, char **argv, options *o)
{
    char cmdsp[32];
    snprintf(cmdsp, sizeof cmdsp, "%s ", o->cmd);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        const struct flag *f = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            print_usage(o->cmd, stdout);
            return 1;
        }
        /* "-D x", "-Dx", "--flag x", "--flag=x"; of a flag's entries, the
           command's */
        for (size_t k = 0; k < NFLAGS; k++) {
            size_t n = strlen(flags[k].name);
            int attached = strcmp(flags[k].name, "-D") == 0;
            if (strncmp(a, flags[k].name, n) != 0 ||
                (a[n] != '\0' && !(flags[k].valued && (a[n] == '=' || attached))))
                continue;
            if (!f || (!applies(f, o->cmd) && applies(&flags[k], o->cmd)))
                f = &flags[k], val = a[n] ? a + n + (a[n] == '=' && !attached) : NULL;
        }
        if (f && f->valued == 2 && !val)
            val = ""; /* the optional value left out */
        if (!f) {
            if (a[0] == '-' && a[1] != '\0')
                return unknown_option(o->cmd, a);
            if (o->c.file)
                return usage_error(cmdsp, "more than one input file ('%s')", a);
            o->c.file = a;
            continue;
        }
        if (!applies(f, o->cmd))
            return usage_error(cmdsp, "option '%s' does not apply to this command", f->name);
        if (!o->program_flag && cli_is_program_flag(f->name))
            o->program_flag = f->name;
        if (f->valued && !val) {
            if (i + 1 >= argc)
                return usage_error(cmdsp, "%s needs a value", f->name);
            val = argv[++i];
        }
        cli_flag_record(o, f->name, f->valued ? val : NULL);
        int rc = 1;
        static int (*const kinds[])(options *, const char *, const char *, const char *) = {
            run_flag, pass_flag, training_flag, partition_flag, codegen_flag};
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds && rc == 1; k++)
            rc = kinds[k](o, cmdsp, f->name, val);
        IR_ASSERT(rc != 1); /* every flag in flags[] is some kind's */
        if (rc != 0)
            return rc;
    }
    if (!o->c.file)
        return usage_error(cmdsp, "no input file%s", "");
    for (int d = o->c.part.devices > 0 ? o->c.part.devices : 1; d < MAX_CAPS; d++)
        if (o->mem_cap[d]) {
            char what[96];
            snprintf(what, sizeof what, "%d, but the program has %d", d,
                     o->c.part.devices > 0 ? o->c.part.devices : 1);
            return usage_error(cmdsp, "--mem-cap names device %s (see --gpus)", what);
        }
    if (o->c.conv_auto && !o->c.autotune)
        return usage_error(cmdsp, "--conv auto times every way of each convolution on the GPU: "
                           "it needs --autotune%s", "");
    /* --json: the object alone on standard output; pass timings and IR dumps
       go to standard error, text that would share standard output is refused */
    const char *text = o->dump_memory && !o->dump_memory_file ? "--dump-memory without a file"
                     : o->profile && !o->profile_file ? "--profile without a file"
                     : o->dump_plan && !o->dump_plan_file ? "--dump-plan without a file" : NULL;
    if (o->json && text)
        return usage_error(cmdsp, "--json and %s both print on standard output", text);
    if (o->json)
        o->c.log = stderr;
    return 0;
}

/* With --remat --train: the planned peak of the program compiled without it. */
static int64_t peak_without_remat(const options *o)
{
    if (!o->c.remat || !o->c.train)
        return -1;
    drv_config plain = o->c;
    plain.remat = 0;
    plain.time_passes = 0;
    plain.dump_ir = NULL;
    diag d;
    diag_init(&d);
    int64_t peak = -1;
    ir_graph *g = drv_load(&plain, 0, &d);
    mp_plan *p = NULL;
    if (g && ad_training_graph(g, &plain.opt, &d) == 0 &&
        (p = drv_optimize(&plain, &plain.part, g, 1, &d)))
        peak = p->arena_bytes;
    mp_plan_free(p);
    if (g)
        ir_graph_free(g);
    diag_free(&d);
    return peak;
}

int cli_make_dirs(const char *dir, const char *flag)
{
    char failed[4096];
    int e = base_make_dirs(dir, 0777, failed, sizeof failed);
    if (e)
        fprintf(stderr, "gnc: error: %s: cannot make the folder '%s': %s\n", flag, failed,
                strerror(e));
    return e ? -1 : 0;
}

int cli_stdout_gone(void)
{
    struct pollfd p = {.fd = 1, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* The picture format Graphviz draws -o FILE in (svg, png, pdf), or NULL. */
static const char *drawn_as(const char *path)
{
    static const char *const kinds[] = {"svg", "png", "pdf"};
    const char *dot = strrchr(path, '.');
    for (int i = 0; dot && i < 3; i++)
        if (strcmp(dot + 1, kinds[i]) == 0)
            return kinds[i];
    return NULL;
}

/* Runs Graphviz: dot -TKIND src -o dst.  0, or -1 after saying why. */
static void dump_to(const options *o, const ir_graph *g, FILE *f)
{
    if (o->dot)
        cli_print_dot(g, f);
    else
        ir_print(g, f);
}

int cli_pipe_to(char *const argv[], int out, void (*write)(FILE *f, const void *ctx),
                const void *ctx, char *err, size_t errlen)
{
    int fds[2];
    if (pipe(fds) != 0)
        return base_fail(err, errlen, "%s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    pid_t pid;
    int spawned = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[0]);
    if (!spawned) {
        close(fds[1]);
        return 1;
    }
    void (*pipe_was)(int) = signal(SIGPIPE, SIG_IGN); /* it may stop reading */
    FILE *w = fdopen(fds[1], "w");
    if (w) {
        write(w, ctx);
        fclose(w);
    } else {
        close(fds[1]);
    }
    signal(SIGPIPE, pipe_was);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return base_fail(err, errlen, "%s failed", argv[0]);
    return 0;
}

typedef struct {
    const options *o;
    const ir_graph *g;
} dump_job;

static void write_dump(FILE *f, const void *ctx)
{
    const dump_job *j = ctx;
    dump_to(j->o, j->g, f);
}

/* The graph drawn by Graphviz's dot as kind (svg, png, pdf) into file
 * descriptor out: the DOT text through a pipe, no file of its own. */
static int draw(const char *kind, const options *o, const ir_graph *g, int out, const char *dst)
{
    char format[16], err[256];
    snprintf(format, sizeof format, "-T%s", kind);
    char *argv[] = {"dot", format, NULL};
    dump_job j = {o, g};
    int rc = cli_pipe_to(argv, out, write_dump, &j, err, sizeof err);
    if (rc == 1)
        fprintf(stderr, "gnc: error: cannot draw '%s': Graphviz's dot is not installed "
                "(Debian: graphviz); write FILE.dot instead\n", dst);
    else if (rc)
        fprintf(stderr, "gnc: error: cannot draw '%s': %s\n", dst, err);
    return rc ? -1 : 0;
}

static int cmd_dump(const options *o, ir_graph *g)
{
    if (!o->out || strcmp(o->out, "-") == 0) {
        dump_to(o, g, stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    const char *kind = o->dot ? drawn_as(o->out) : NULL;
    char err[1024];
    base_out out;
    if (base_out_open(&out, o->out, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (kind) {
        fflush(out.f);
        rc = draw(kind, o, g, fileno(out.f), o->out);
    } else {
        dump_to(o, g, out.f);
    }
    if (rc) {
        base_out_abandon(&out);
        return 1;
    }
    if (base_out_commit(&out, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return 1;
    }
    return 0;
}

/* What gnc compile reports, computed once (compile_summarize) and printed as
 * the summary (cmd_compile), as --stats (print_stats) or as JSON
 * (compile_json). */
typedef struct {
    int64_t trainable, buffers;     /* elements of the parameters, of the buffers */
    int tensors;                    /* trainable parameter tensors */
    double param_bytes;             /* parameters and buffers at their dtypes */
    int by_op[IR_NOPS];             /* nodes of each op */
    double flops;                   /* cost_gemm_flops of every node */
    int64_t batch;                  /* the first input's first dimension, or 1 */
    /* a fused node is one kernel; what is computed from the weights alone runs
       once, not in each run: counted apart */
    int ops, fused, kernels, weight_ops;
    int recomputed;                 /* --remat --train: batchnorm-ReLU results recomputed */
    double remat_flops;             /* the FLOPs that adds: 3 per element, and 1 of relu */
    int64_t without_remat;          /* the planned peak without --remat, or -1 */
    int ndevices;                   /* the CUDA program's devices; 0: not generated */
    struct summary_device {
        cg_run_stats s;
        double run_ms, launch_ms;   /* drv_predict on the device model */
        double class_ms[DRV_NCLASSES];  /* run_ms by class of kernel */
    } *dev;
} compile_summary;

/* s of g and plan; with cuda, what one run asks of each GPU too, from the CUDA
 * program generated here (without NVRTC).  0, or -1 out of memory. */
static int compile_summarize(const options *o, const ir_graph *g, const mp_plan *plan, int cuda,
                             int64_t without_remat, compile_summary *s)
{
    memset(s, 0, sizeof *s);
    s->without_remat = without_remat;
    for (int i = 0; i < g->nparams; i++) {
        const ir_value *v = g->params[i];
        if (v->kind == IR_VALUE_PARAM) {
            s->trainable += ir_type_numel(&v->type);
            s->tensors++;
        } else {
            s->buffers += ir_type_numel(&v->type);
        }
        s->param_bytes += (double)ir_type_bytes(&v->type);
    }
    int remat = o->c.remat && o->c.train;
    ir_for_each_node(g, n) {
        s->by_op[n->op]++;
        s->flops += cost_gemm_flops(n);
        if (remat && n->op == IR_OP_BATCHNORM_APPLY) {
            s->remat_flops += 4.0 * (double)ir_type_numel(&n->out[0]->type);
            s->recomputed++;
        }
    }
    s->batch = g->ninputs && g->inputs[0]->type.rank ? g->inputs[0]->type.dims[0] : 1;
    unsigned char *weight = calloc((size_t)g->nvalues + 1, 1);
    if (!weight)
        return -1;
    ir_weight_only(g, weight);
    ir_for_each_node(g, n) {
        if (weight[n->out[0]->id]) {
            s->weight_ops++;
            continue;
        }
        int starts = !n->group || !n->prev || n->prev->group != n->group;
        s->kernels += starts;
        s->fused += starts && n->group;
    }
    free(weight);
    s->ops = g->nnodes - s->weight_ops;
    if (!cuda || o->c.no_kernels)
        return 0;
    cg_options co = cg_options_default();
    co.precision = o->c.precision;
    co.conv = (cg_conv_impl)o->c.conv;
    co.layout = (cg_layout)o->c.layout;
    co.deterministic = o->c.part.deterministic;
    diag d;
    diag_init(&d);
    cg_program *p = cg_generate(g, plan, &co, &d);
    diag_free(&d);
    cost_device model;
    char err[160];
    if (p && cost_device_parse(o->c.device_model ? o->c.device_model : "h100-nvlink", &model,
                               err, sizeof err) != 0)
        model = *cost_device_lookup("h100-nvlink");
    cost_device_at(&model, o->c.precision);
    if (p && !(s->dev = calloc((size_t)p->ndevices, sizeof *s->dev))) {
        cg_program_free(p);
        return -1;
    }
    for (int dev = 0; p && dev < p->ndevices; dev++) {
        struct summary_device *x = &s->dev[dev];
        cg_run_stats_of(p, dev, &x->s);
        drv_prediction r;
        drv_predict(p, dev, &model, &r, NULL);
        x->run_ms = r.seconds * 1e3, x->launch_ms = r.launch_s * 1e3;
        for (int k = 0; k < DRV_NCLASSES; k++)
            x->class_ms[k] = r.by_class[k] * 1e3;
    }
    s->ndevices = p ? p->ndevices : 0;
    cg_program_free(p);
    return 0;
}

/* without_remat: the planned peak of the same program without --remat (or -1). */
static int cmd_compile(const options *o, ir_graph *g, const mp_plan *plan, int64_t without_remat,
                       double ms)
{
    char t[128], b[32];
    compile_summary s;
    if (compile_summarize(o, g, plan, 0, without_remat, &s) != 0) {
        fprintf(stderr, "gnc: error: out of memory\n");
        return 1;
    }
    char nb[160]; /* names as the IR writes them: an imported model's may hold any byte */
    printf("model %s (%s)\n", ir_name_str(nb, sizeof nb, g->name), o->c.file);
    for (int i = 0; i < g->ninputs; i++)
        printf("  input  %-12s %s\n", ir_name_str(nb, sizeof nb, g->inputs[i]->name),
               ir_type_str(&g->inputs[i]->type, t, sizeof t));
    for (int i = 0; i < g->noutputs; i++)
        printf("  output %-12s %s\n", ir_name_str(nb, sizeof nb, g->outputs[i].name),
               ir_type_str(&g->outputs[i].value->type, t, sizeof t));
    if (g->loss)
        printf("  loss   %-12s %s\n", ir_name_str(nb, sizeof nb, g->loss->name),
               ir_type_str(&g->loss->type, t, sizeof t));
    base_human_bytes(s.param_bytes, b, sizeof b);
    printf("parameters: %lld trainable in %d tensors, %lld in buffers, %s\n",
           (long long)s.trainable, s.tensors, (long long)s.buffers, b);
    printf("operations: %d nodes:", g->nnodes);
    for (int k = 0, first = 1; k < IR_NOPS; k++)
        if (s.by_op[k]) {
            printf("%s %s %d", first ? "" : ",", ir_ops[k].name, s.by_op[k]);
            first = 0;
        }
    printf("\n%s: %.3f GFLOP (%.4f GFLOP per sample of %lld)\n",
           o->c.train ? "forward and backward" : "forward", s.flops / 1e9,
           s.flops / 1e9 / (double)s.batch, (long long)s.batch);
    char lb[32], nr[32];
    base_human_bytes((double)plan->arena_bytes, b, sizeof b);
    base_human_bytes((double)plan->lower_bound, lb, sizeof lb);
    base_human_bytes((double)plan->no_reuse_bytes, nr, sizeof nr);
    printf("memory: activations %s planned (lower bound %s, %.3fx; %s without reuse)\n", b, lb,
           plan->lower_bound ? (double)plan->arena_bytes / (double)plan->lower_bound : 1.0, nr);
    if (o->c.remat && o->c.train && without_remat >= 0) {
        char wb[32], sb[32];
        base_human_bytes((double)without_remat, wb, sizeof wb);
        base_human_bytes((double)(without_remat - plan->arena_bytes), sb, sizeof sb);
        printf("remat: %d batchnorm-ReLU results recomputed: activations %s instead of %s "
               "(%s saved), %.3f GFLOP added (%.2f%% of the step)\n", s.recomputed, b, wb, sb,
               s.remat_flops / 1e9, s.flops > 0 ? 100 * s.remat_flops / s.flops : 0.0);
    }
    printf("compiled in %.1f ms\n", ms);
    return 0;
}

/* --stats: one key: value per line, for scripts. */
static void print_stats(const options *o, const ir_graph *g, const mp_plan *plan, double ms)
{
    compile_summary s;
    if (compile_summarize(o, g, plan, 1, -1, &s) != 0)
        return;
    printf("ops: %d\nfused_nodes: %d\nkernels: %d\nweight_ops: %d\n", s.ops, s.fused, s.kernels,
           s.weight_ops);
    printf("memory.peak_bytes: %lld\nmemory.lower_bound_bytes: %lld\n"
           "memory.no_reuse_bytes: %lld\n", (long long)plan->arena_bytes,
           (long long)plan->lower_bound, (long long)plan->no_reuse_bytes);
    printf("params.bytes: %lld\ncompile_ms: %.3f\n", (long long)plan->param_bytes, ms);
    /* what a run asks of each GPU, from the CUDA program (without NVRTC) */
    for (int dev = 0; dev < s.ndevices; dev++) {
        const cg_run_stats *x = &s.dev[dev].s;
        printf("cuda.d%d.predicted_run_ms: %.3f\ncuda.d%d.launch_ms: %.3f\n", dev,
               s.dev[dev].run_ms, dev, s.dev[dev].launch_ms);
        for (int k = 0; k < DRV_NCLASSES; k++)
            printf("cuda.d%d.predicted.%s_ms: %.3f\n", dev, drv_class_names[k],
                   s.dev[dev].class_ms[k]);
        printf("cuda.d%d.steps: %d\ncuda.d%d.kernels: %d\ncuda.d%d.library_calls: %d\n"
               "cuda.d%d.communication: %d\ncuda.d%d.copies: %d\ncuda.d%d.copy_bytes: %lld\n"
               "cuda.d%d.kernel_read_bytes: %lld\ncuda.d%d.kernel_written_bytes: %lld\n"
               "cuda.d%d.smallest_big_grid: %lld\n", dev, x->steps, dev, x->kernels, dev,
               x->library, dev, x->comms, dev, x->copies, dev, (long long)x->copy_bytes, dev,
               (long long)x->kernel_read_bytes, dev, (long long)x->kernel_written_bytes, dev,
               (long long)x->big_min_blocks);
        printf("cuda.d%d.layout_transposes: %d\ncuda.d%d.library_layout_transposes: %d\n", dev,
               x->layout_own, dev, x->layout_library);
    }
    free(s.dev);
}

cJSON *cli_json_number(cJSON *obj, const char *key, double v)
{
    return isfinite(v) ? cJSON_AddNumberToObject(obj, key, v) : cJSON_AddNullToObject(obj, key);
}

int cli_json_print(cJSON *root)
{
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "gnc: error: out of memory\n");
        return 1;
    }
    puts(text);
    free(text);
    return 0;
}

/* {"name", "dtype", "shape"} of a value; without name where it is NULL. */
static cJSON *type_json(const char *name, const ir_type *t)
{
    cJSON *j = cJSON_CreateObject();
    if (name)
        cJSON_AddStringToObject(j, "name", name);
    cJSON_AddStringToObject(j, "dtype", ir_dtype_name(t->dtype));
    cJSON *shape = cJSON_AddArrayToObject(j, "shape");
    for (int k = 0; k < t->rank; k++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->dims[k]));
    return j;
}

/* compile --json (with --stats the same): the summary's and --stats' figures
 * as one object, printed after the plan file is written (plan: its path). */
static int compile_json(const options *o, const drv_program *p, double ms)
{
    const ir_graph *g = p->g;
    const mp_plan *plan = p->mp;
    compile_summary s;
    if (compile_summarize(o, g, plan, 1, peak_without_remat(o), &s) != 0) {
        fprintf(stderr, "gnc: error: out of memory\n");
        return 1;
    }
    cJSON *root = cJSON_CreateObject(), *a, *x;
    cJSON_AddStringToObject(root, "model", g->name);
    cJSON_AddStringToObject(root, "file", o->c.file);
    cJSON_AddBoolToObject(root, "training", o->c.train);
    a = cJSON_AddArrayToObject(root, "inputs");
    for (int i = 0; i < g->ninputs; i++)
        cJSON_AddItemToArray(a, type_json(g->inputs[i]->name, &g->inputs[i]->type));
    a = cJSON_AddArrayToObject(root, "outputs");
    for (int i = 0; i < g->noutputs; i++)
        cJSON_AddItemToArray(a, type_json(g->outputs[i].name, &g->outputs[i].value->type));
    if (g->loss)
        cJSON_AddItemToObject(root, "loss", type_json(g->loss->name, &g->loss->type));
    else
        cJSON_AddNullToObject(root, "loss");
    x = cJSON_AddObjectToObject(root, "parameters");
    cJSON_AddNumberToObject(x, "trainable", (double)s.trainable);
    cJSON_AddNumberToObject(x, "tensors", s.tensors);
    cJSON_AddNumberToObject(x, "buffers", (double)s.buffers);
    cJSON_AddNumberToObject(x, "bytes", s.param_bytes);
    x = cJSON_AddObjectToObject(root, "operations");
    cJSON_AddNumberToObject(x, "nodes", g->nnodes);
    x = cJSON_AddObjectToObject(x, "by_op");
    for (int k = 0; k < IR_NOPS; k++)
        if (s.by_op[k])
            cJSON_AddNumberToObject(x, ir_ops[k].name, s.by_op[k]);
    x = cJSON_AddObjectToObject(root, "flops");
    cJSON_AddNumberToObject(x, "total", s.flops);
    cJSON_AddNumberToObject(x, "per_sample", s.flops / (double)s.batch);
    cJSON_AddNumberToObject(x, "batch", (double)s.batch);
    cJSON_AddBoolToObject(x, "training", o->c.train);
    x = cJSON_AddObjectToObject(root, "memory");
    cJSON_AddNumberToObject(x, "peak_bytes", (double)plan->arena_bytes);
    cJSON_AddNumberToObject(x, "lower_bound_bytes", (double)plan->lower_bound);
    cJSON_AddNumberToObject(x, "no_reuse_bytes", (double)plan->no_reuse_bytes);
    cJSON_AddNumberToObject(x, "param_bytes", (double)plan->param_bytes);
    cJSON_AddNumberToObject(root, "ops", s.ops);
    cJSON_AddNumberToObject(root, "fused_nodes", s.fused);
    cJSON_AddNumberToObject(root, "kernels", s.kernels);
    cJSON_AddNumberToObject(root, "weight_ops", s.weight_ops);
    a = cJSON_AddArrayToObject(root, "devices");
    for (int dev = 0; dev < s.ndevices; dev++) {
        const cg_run_stats *c = &s.dev[dev].s;
        x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "device", dev);
        cJSON_AddNumberToObject(x, "predicted_run_ms", s.dev[dev].run_ms);
        cJSON *by = cJSON_AddObjectToObject(x, "predicted");
        for (int k = 0; k < DRV_NCLASSES; k++) {
            char key[48];
            snprintf(key, sizeof key, "%s_ms", drv_class_names[k]);
            cJSON_AddNumberToObject(by, key, s.dev[dev].class_ms[k]);
        }
        cJSON_AddNumberToObject(x, "launch_ms", s.dev[dev].launch_ms);
        cJSON_AddNumberToObject(x, "steps", c->steps);
        cJSON_AddNumberToObject(x, "kernels", c->kernels);
        cJSON_AddNumberToObject(x, "library_calls", c->library);
        cJSON_AddNumberToObject(x, "communication", c->comms);
        cJSON_AddNumberToObject(x, "copies", c->copies);
        cJSON_AddNumberToObject(x, "copy_bytes", (double)c->copy_bytes);
        cJSON_AddNumberToObject(x, "kernel_read_bytes", (double)c->kernel_read_bytes);
        cJSON_AddNumberToObject(x, "kernel_written_bytes", (double)c->kernel_written_bytes);
        cJSON_AddNumberToObject(x, "layout_transposes", c->layout_own);
        cJSON_AddNumberToObject(x, "library_layout_transposes", c->layout_library);
        if (c->big_min_step)
            cJSON_AddNumberToObject(x, "smallest_big_grid", (double)c->big_min_blocks);
        else
            cJSON_AddNullToObject(x, "smallest_big_grid");
        cJSON_AddItemToArray(a, x);
    }
    free(s.dev);
    if (p->plan && p->plan->ndevices > 1) {
        x = cJSON_AddObjectToObject(root, "partition");
        cJSON_AddNumberToObject(x, "devices", p->plan->ndevices);
        cJSON_AddStringToObject(x, "strategy", p->plan->strategy);
        cJSON_AddStringToObject(x, "device_model", p->plan->cost.name);
        cli_json_number(x, "predicted_step_ms", p->plan->step_ms);
    } else {
        cJSON_AddNullToObject(root, "partition");
    }
    if (o->c.remat && o->c.train && s.without_remat >= 0) {
        x = cJSON_AddObjectToObject(root, "remat");
        cJSON_AddNumberToObject(x, "recomputed", s.recomputed);
        cJSON_AddNumberToObject(x, "peak_bytes_without", (double)s.without_remat);
        cJSON_AddNumberToObject(x, "saved_bytes", (double)(s.without_remat - plan->arena_bytes));
        cJSON_AddNumberToObject(x, "added_flops", s.remat_flops);
    } else {
        cJSON_AddNullToObject(root, "remat");
    }
    cJSON_AddNumberToObject(root, "compile_ms", ms);
    if (o->out && strcmp(o->out, "-") != 0)
        cJSON_AddStringToObject(root, "plan", o->out);
    else
        cJSON_AddNullToObject(root, "plan");
    return cli_json_print(root);
}

/* Input `index` of the program g (its place in g->inputs, which a plan keeps)
 * at random for seed: the same values for the model and for its plan.  An
 * integer input takes values below what reads it as labels or indices
 * (ir_index_bound: a 5-class loss's labels in [0, 5)), else in [0, 10). */
static void fill_random(const ir_graph *g, const ir_value *v, int index, uint64_t seed,
                        void *data)
{
    int64_t n = ir_type_numel(&v->type), bound = ir_index_bound(g, v);
    uint64_t top = bound > 0 ? (uint64_t)bound : 10;
    if (v->type.dtype == IR_U8 && top > 256)
        top = 256;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull + (uint64_t)index;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        switch (v->type.dtype) {
        case IR_I32: ((int32_t *)data)[i] = (int32_t)(s % top); break;
        case IR_I64: ((int64_t *)data)[i] = (int64_t)(s % top); break;
        case IR_U8: ((uint8_t *)data)[i] = (uint8_t)(s % top); break;
        default: ((float *)data)[i] = (float)((s >> 40) * 0x1.0p-24); break;
        }
    }
}

static void print_tensor(const char *name, const ir_value *v, const void *data)
{
    char t[128];
    int64_t n = ir_type_numel(&v->type);
    int64_t row = v->type.rank ? v->type.dims[v->type.rank - 1] : 1;
    int64_t rows = n / (row ? row : 1);
    printf("%s: %s\n", name, ir_type_str(&v->type, t, sizeof t));
    for (int64_t r = 0; r < rows && r < 4; r++) {
        printf("  [");
        for (int64_t c = 0; c < row && c < 8; c++) {
            int64_t i = r * row + c;
            if (v->type.dtype == IR_I32)
                printf("%s%d", c ? " " : "", ((const int32_t *)data)[i]);
            else if (v->type.dtype == IR_I64)
                printf("%s%lld", c ? " " : "", (long long)((const int64_t *)data)[i]);
            else if (v->type.dtype == IR_U8)
                printf("%s%u", c ? " " : "", ((const uint8_t *)data)[i]);
            else
                printf("%s%.6g", c ? " " : "", ((const float *)data)[i]);
        }
        printf("%s]\n", row > 8 ? " ..." : "");
    }
    if (rows > 4)
        printf("  ... (%lld rows)\n", (long long)rows);
}

/* The shortest decimal that reads back as f (as numpy prints a float32), or
 * null where f is not finite. */
static cJSON *float_json(float f)
{
    char num[32];
    if (!isfinite(f))
        return cJSON_CreateNull();
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(num, sizeof num, "%.*g", digits, (double)f);
        if (strtof(num, NULL) == f)
            break;
    }
    return cJSON_CreateRaw(num);
}

/* A tensor for run --json: {"dtype", "shape", "values"}, every value in
 * row-major order (as the executor holds it: floating point as float32). */
static cJSON *tensor_json(const ir_value *v, const void *data)
{
    cJSON *j = type_json(NULL, &v->type), *a = cJSON_AddArrayToObject(j, "values");
    int64_t n = ir_type_numel(&v->type);
    char num[32];
    if (!a) { /* out of memory */
        cJSON_Delete(j);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        cJSON *x;
        if (v->type.dtype == IR_I32) {
            x = cJSON_CreateNumber(((const int32_t *)data)[i]);
        } else if (v->type.dtype == IR_I64) { /* exact past 2^53, where a double is not */
            snprintf(num, sizeof num, "%lld", (long long)((const int64_t *)data)[i]);
            x = cJSON_CreateRaw(num);
        } else if (v->type.dtype == IR_U8) {
            x = cJSON_CreateNumber(((const uint8_t *)data)[i]);
        } else {
            x = float_json(((const float *)data)[i]);
        }
        if (!cJSON_AddItemToArray(a, x)) { /* out of memory */
            cJSON_Delete(x);
            cJSON_Delete(j);
            return NULL;
        }
    }
    return j;
}

/* run --json: the outputs whole, the loss, the median time beside the
 * predicted one, the planned memory beside the measured. */
static int run_json(const options *o, const ir_graph *g, rt_session *s, double ms, int repeat,
                    double predicted, const char *model, const cli_mem *mem)
{
    cJSON *root = cJSON_CreateObject(), *outs;
    cJSON_AddStringToObject(root, "model", g->name);
    cJSON_AddStringToObject(root, "file", o->c.file);
    cJSON_AddStringToObject(root, "device", o->cuda ? "cuda" : "cpu");
    char seed[32]; /* exact, as a double is not past 2^53 */
    snprintf(seed, sizeof seed, "%llu", o->seed);
    cJSON_AddRawToObject(root, "seed", seed);
    outs = cJSON_AddObjectToObject(root, "outputs");
    for (int i = 0; i < g->noutputs; i++) {
        cJSON *t = tensor_json(g->outputs[i].value, rt_session_data(s, g->outputs[i].value));
        if (!t || !cJSON_AddItemToObject(outs, g->outputs[i].name, t)) {
            cJSON_Delete(t);
            cJSON_Delete(root);
            root = NULL; /* out of memory */
            break;
        }
    }
    const float *loss = g->loss ? rt_session_data(s, g->loss) : NULL;
    if (root && loss && ir_type_numel(&g->loss->type) == 1)
        cJSON_AddItemToObject(root, "loss", float_json(*loss));
    else if (root)
        cJSON_AddNullToObject(root, "loss");
    cJSON_AddNumberToObject(root, "time_ms", ms);
    cJSON_AddNumberToObject(root, "repeat", repeat);
    if (root) {
        cli_json_number(root, "predicted_ms", predicted);
        cJSON_AddStringToObject(root, "device_model", model);
        cli_mem_json(mem, root);
    }
    return cli_json_print(root);
}

/* run -o DIR: each output as DIR/NAME.npy (making DIR), and the loss as
 * DIR/loss.npy.  0, or -1 after saying why. */
static int write_outputs(const char *dir, const ir_graph *g, rt_session *s)
{
    char err[512];
    if (cli_make_dirs(dir, "-o") != 0)
        return -1;
    for (int i = 0; i < g->noutputs; i++) {
        size_t n = strlen(dir) + strlen(g->outputs[i].name) + 8;
        char *path = malloc(n);
        if (!path)
            return -1;
        snprintf(path, n, "%s/%s.npy", dir, g->outputs[i].name);
        int bad = npy_write(path, &g->outputs[i].value->type,
                            rt_session_data(s, g->outputs[i].value), err, sizeof err);
        free(path);
        if (bad) {
            fprintf(stderr, "gnc: error: %s\n", err);
            return -1;
        }
    }
    /* the loss too, as loss.npy (unless an output has that name) */
    const void *loss = g->loss ? rt_session_data(s, g->loss) : NULL;
    for (int i = 0; loss && i < g->noutputs; i++)
        if (strcmp(g->outputs[i].name, "loss") == 0)
            loss = NULL;
    if (!loss)
        return 0;
    size_t n = strlen(dir) + 16;
    char *path = malloc(n);
    if (!path)
        return -1;
    snprintf(path, n, "%s/loss.npy", dir);
    int bad = npy_write(path, &g->loss->type, loss, err, sizeof err);
    free(path);
    if (bad)
        fprintf(stderr, "gnc: error: %s\n", err);
    return bad ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Under MPI every rank runs its device on the same inputs; rank 0, which holds
 * the outputs and the loss, prints them and writes -o. */
static int cmd_run(const options *o, const drv_program *p)
{
    char err[512];
    ir_graph *g = p->g;
    if (p->file && p->file->training) {
        fprintf(stderr, "gnc: error: %s is a training step; train it with 'gnc train %s --data "
                "DIR', or run an inference plan (gnc compile without --train)\n", o->c.file,
                o->c.file);
        return 1;
    }
    if (o->threads)
        rt_set_threads(o->threads);
    cli_mem mem; /* the baseline: compiled, nothing of the run allocated yet */
    cli_mem_start(&mem);
    rt_session *s = cli_session_new(o, p, 1, o->seed, err, sizeof err);
    if (!s) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return 1;
    }
    rt_session_set_timeout(s, o->timeout);
    rt_exec_set_profile(rt_session_host(s), o->profile);
    if (rt_session_gpu(s))
        rt_cuda_set_profile(rt_session_gpu(s), o->profile_file != NULL);
    int rc = 1;
    if (o->weights && rt_session_load(s, o->weights, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        goto done;
    }
    for (int i = 0; i < g->ninputs; i++)
        fill_random(g, g->inputs[i], i, o->seed, rt_session_data(s, g->inputs[i]));
    for (int k = 0; k < o->ninputs; k++) {
        const ir_value *v = NULL;
        if (!o->input_names[k] && g->ninputs == 1)
            v = g->inputs[0];
        else if (!o->input_names[k]) {
            fprintf(stderr, "gnc: error: --input %s: the model has %d inputs; name one "
                    "(--input NAME=FILE.npy)\n", o->input_files[k], g->ninputs);
            goto done;
        }
        for (int i = 0; !v && i < g->ninputs; i++)
            if (strcmp(g->inputs[i]->name, o->input_names[k]) == 0)
                v = g->inputs[i];
        if (!v) {
            fprintf(stderr, "gnc: error: --input: the model has no input '%s'\n", o->input_names[k]);
            goto done;
        }
        if (npy_read(o->input_files[k], &v->type, rt_session_data(s, v), err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            goto done;
        }
    }
    for (int i = 0; i < g->ninputs; i++)
        if (rt_session_set_input(s, g->inputs[i], NULL, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            goto done;
        }
    int repeat = o->repeat ? o->repeat : 1;
    double *times = calloc((size_t)repeat, sizeof *times);
    if (!times)
        goto done;
    for (int r = 0; r < repeat; r++) {
        double t0 = base_now_ms();
        if (rt_session_run(s, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            free(times);
            goto done;
        }
        cli_session_warn(s);
        times[r] = base_now_ms() - t0;
    }
    qsort(times, (size_t)repeat, sizeof *times, cmp_double);
    const char *model = "";
    double predicted = predicted_step_ms(o, p, &model);
    cli_mem_end(&mem, s, 0);
    if (o->world->rank > 0) {
        free(times);
        rc = 0;
        goto done;
    }
    for (int i = 0; i < g->noutputs; i++)
        if (!rt_session_data(s, g->outputs[i].value)) {
            fprintf(stderr, "gnc: error: output %s is computed on device %d, and under MPI only "
                    "rank 0's are printed\n", g->outputs[i].name,
                    g->outputs[i].value->def ? g->outputs[i].value->def->device : 0);
            free(times);
            goto done;
        }
    /* -o first: on an error nothing is printed */
    if (o->out && write_outputs(o->out, g, s) != 0) {
        free(times);
        goto done;
    }
    if (o->json) {
        rc = run_json(o, g, s, times[repeat / 2], repeat, predicted, model, &mem);
        free(times);
        goto done;
    }
    for (int i = 0; i < g->noutputs; i++)
        print_tensor(g->outputs[i].name, g->outputs[i].value,
                     rt_session_data(s, g->outputs[i].value));
    if (g->loss && rt_session_data(s, g->loss))
        print_tensor("loss", g->loss, rt_session_data(s, g->loss));
    printf("time: %.2f ms (median of %d), predicted %.2f ms on %s\n", times[repeat / 2], repeat,
           predicted, model);
    cli_mem_print(&mem, stdout);
    if (o->profile && !rt_session_gpu(s))
        rt_exec_print_profile(rt_session_host(s), stdout);
    free(times);
    rc = o->profile_file ? cli_write_measured_trace(s, "measured: gnc run",
                                                    o->profile_file)
                         : 0;
done:
    rt_session_free(s);
    return rc;
}

static void options_free(options *o)
{
    for (int i = 0; i < o->c.ndefines; i++)
        free((char *)o->c.define_names[i]);
    for (int i = 0; i < o->ninputs; i++)
        free((char *)o->input_names[i]);
    o->c.ndefines = o->ninputs = 0;
}

/* A plan given as FILE: the options that apply; and the device of the
 * commands that run (cli_device).  Returns 0 or the exit status. */
static int plan_options(options *o, int is_plan)
{
    if (is_plan && strcmp(o->cmd, "compile") == 0)
        return usage_error("compile ", "%s is a plan, compiled already (see 'gnc inspect')",
                           o->c.file);
    if (is_plan && o->program_flag) {
        fprintf(stderr, "gnc: error: option '%s' shapes a compiled program, and %s is a plan, "
                "compiled with its own (see 'gnc inspect %s')\n(see 'gnc %s --help')\n",
                o->program_flag, o->c.file, o->c.file, o->cmd);
        return 2;
    }
    if (strcmp(o->cmd, "run") == 0 || strcmp(o->cmd, "train") == 0 ||
        strcmp(o->cmd, "eval") == 0)
        return cli_device(o);
    return 0;
}

/* One gnc command; world: the MPI world it runs in (cli_mpi_init). */
/* gnc devices: a line per GPU the driver sees. */
/* gnc plot LOG... -o FILE.svg [--name NAME before a LOG] */
static int cmd_plot(int argc, char **argv)
{
    const char *out = NULL, *name = NULL;
    plot_run runs[16];
    int nruns = 0, rc = 0;
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            print_usage("plot", stdout);
            return 0;
        }
    diag d;
    diag_init(&d);
    for (int i = 0; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-o") == 0 || strcmp(a, "--name") == 0) {
            if (i + 1 == argc) {
                rc = usage_error("plot ", "%s needs a value", a);
                break;
            }
            *(a[1] == 'o' ? &out : &name) = argv[++i];
            continue;
        }
        if (a[0] == '-' && a[1]) {
            rc = usage_error("plot ", "unknown option '%s'", a);
            break;
        }
        if (nruns == 16) {
            rc = usage_error("plot ", "at most 16 logs in one picture, '%s' is the 17th", a);
            break;
        }
        plot_run *r = &runs[nruns++];
        memset(r, 0, sizeof *r);
        const char *base = strrchr(a, '/');
        r->name = base_xstrdup(name ? name : base ? base + 1 : a);
        name = NULL;
        if (plot_read_log(a, 0, r, &d) != 0) {
            diag_print(&d, stderr);
            rc = 1;
        }
    }
    if (rc == 0) {
        char err[1024];
        if (!nruns)
            rc = usage_error("plot ", "no log to draw%s", "");
        else if (!out)
            rc = usage_error("plot ", "-o FILE.svg is required%s", "");
        else if (!cli_has_suffix(out, ".svg") && !cli_has_suffix(out, ".png"))
            rc = usage_error("plot ", "-o %s: the picture is SVG or PNG, a name ending in .svg "
                             "or .png", out);
        else if (plot_write(out, runs, nruns, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: %s\n", err);
            rc = 1;
        }
    }
    for (int i = 0; i < nruns; i++)
        plot_run_free(&runs[i]);
    diag_free(&d);
    return rc;
}

static int cmd_devices(int argc, char **argv)
{
    char err[1024];
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            print_usage("devices", stdout);
            return 0;
        }
        return usage_error("devices ", "unknown option '%s'", argv[i]);
    }
    int n = rt_cuda_gpu_count(NULL, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "gnc: error: %s\n", err);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        rt_cuda_gpu g;
        if (rt_cuda_gpu_describe(NULL, i, &g, err, sizeof err) != 0) {
            fprintf(stderr, "gnc: error: GPU %d: %s\n", i, err);
            return 1;
        }
        const double mib = 1024.0 * 1024.0;
        printf("GPU %d: %s, sm_%d%d, %d SMs, %.0f MiB (%.0f MiB free), CUDA driver %d.%d\n", i,
               g.name, g.major, g.minor, g.sms, (double)g.total_bytes / mib,
               (double)g.free_bytes / mib, g.driver_version / 1000,
               g.driver_version % 1000 / 10);
    }
    return 0;
}

/* A model or plan read from a pipe or a terminal (/dev/stdin, <(...), or
 * '-', standard input, which messages call <stdin>) can be read once: its
 * bytes are read now and kept (base_preload), so that probing them for a
 * plan and loading the model (twice, for training) see them all. */
static int preload_stream(options *o)
{
    const char *path = o->c.file;
    int std = path && strcmp(path, "-") == 0;
    struct stat st;
    if (!path || (!std && (stat(path, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))))
        return 0;
    size_t len;
    const char *why = NULL;
    char *data = base_read_file(std ? "/dev/stdin" : path, &len, &why);
    if (!data) {
        fprintf(stderr, "gnc: error: %s: cannot read: %s\n", std ? "<stdin>" : path, why);
        return 1;
    }
    if (std)
        o->c.file = path = "<stdin>";
    base_preload(path, data, len);
    return 0;
}

/* gnc --version: the version and commit, what the build has, and which
 * NVIDIA libraries load here now. */
static int print_version(void)
{
    printf("gnc %s (commit %s)\n", GNC_VERSION, GNC_COMMIT);
    const char *nvrtc = cg_nvrtc_version(), *mpi = cli_mpi_library(), *what, *name;
    int cuda = rt_cuda_library(0, &what) != NULL;
    printf("built with:\n");
    if (nvrtc)
        printf("  NVRTC %s: CUDA kernels compiled into plans\n", nvrtc);
    else
        printf("  no NVRTC (built without the CUDA toolkit): plans without CUDA kernels\n");
    printf("  %s\n", cuda ? "the CUDA runtime: --device cuda, with the libraries below"
                          : "no CUDA runtime (built without the CUDA toolkit): the CPU only");
    if (mpi)
        printf("  %s: under mpirun, a device per rank\n", mpi);
    else
        printf("  no MPI: one process (--devices cpu:N for several devices)\n");
    char kernels[512];
    rt_cpu_kernels(kernels, sizeof kernels);
    for (char *k = kernels, *next; k; k = next) { /* a line a library */
        next = strstr(k, "; ");
        if (next)
            *next = 0, next += 2;
        printf("  %s\n", k);
    }
    if (cuda)
        printf("NVIDIA libraries, from %s:\n", getenv("GNC_CUDA_LIBDIR") &&
               *getenv("GNC_CUDA_LIBDIR") ? "GNC_CUDA_LIBDIR" : "the loader's path");
    for (int i = 0; (name = rt_cuda_library(i, &what)); i++) {
        char why[512];
        int ok = rt_cuda_library_loads(NULL, name, why, sizeof why);
        printf("  %-18s %-14s %s\n", name, ok ? "loads" : "does not load", what);
        if (!ok)
            printf("%21s(%s)\n", "", why);
    }
    return 0;
}

static int command(int argc, char **argv, cli_world *world)
{
    if (argc < 2) {
        print_usage(NULL, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        print_usage(NULL, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0)
        return print_version();
    static const char *const cmds[] = {"dump", "compile", "run", "train", "eval", "export",
                                       "inspect", "plot", "devices", "help"};
    enum { NCMDS = sizeof cmds / sizeof *cmds };
    int known = 0;
    for (int i = 0; i < NCMDS; i++)
        known |= strcmp(cmd, cmds[i]) == 0;
    if (strcmp(cmd, "help") == 0 && argc == 3 && strcmp(argv[2], "--man") == 0) {
        print_man(stdout);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        int ok = argc <= 2;
        for (int i = 0; i < NCMDS - 1 && !ok; i++)
            ok = strcmp(argv[2], cmds[i]) == 0;
        if (!ok)
            return usage_error(NULL, "unknown command '%s'", argv[2]);
        print_usage(argc > 2 ? argv[2] : NULL, stdout);
        return 0;
    }
    if (!known) {
        const char *s = diag_suggest(cmd, cmds, NCMDS);
        fprintf(stderr, "gnc: error: unknown command '%s'%s%s%s\n(see 'gnc --help')\n", cmd,
                s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
        return 2;
    }
    if (strcmp(cmd, "devices") == 0)
        return world->rank > 0 ? 0 : cmd_devices(argc - 2, argv + 2);
    if (strcmp(cmd, "plot") == 0)
        return world->rank > 0 ? 0 : cmd_plot(argc - 2, argv + 2);
    options o = {.c = {.opt = ad_optimizer_default(AD_SGD), .strategy_auto = 1,
                       .part = {.devices = 1, .strategy = PT_DATA}},
                 .cmd = cmd, .lr = 0.1, .gamma = 0.1, .test_fraction = 0.1};
    o.c.opt.weight_decay = -1; /* unset: the optimizer's default */
    o.c.mem_cap = o.mem_cap;
    o.c.flags = o.flags;
    o.c.warnings = stderr;
    o.c.progress = isatty(STDERR_FILENO) && world->rank == 0 ? stderr : NULL;
    o.world = world;
    o.argc = argc, o.argv = argv;
    int rc = parse_args(argc - 2, argv + 2, &o);
    if (rc) {
        options_free(&o);
        return rc == 1 ? 0 : rc;
    }
    if ((rc = preload_stream(&o)) != 0) {
        options_free(&o);
        return rc;
    }
    if (strcmp(cmd, "inspect") == 0)
        return world->rank > 0 ? 0 : cmd_inspect(&o);
    if (strcmp(cmd, "export") == 0) {
        rc = world->rank > 0 ? 0 : cmd_export(&o);
        options_free(&o);
        return rc;
    }
    int is_plan = cli_is_plan(o.c.file);
    if ((rc = plan_options(&o, is_plan)) != 0) {
        options_free(&o);
        return rc;
    }
    if ((rc = cli_mpi_options(&o, cmd)) != 0)
        return rc;
    if (world->rank > 0 && (strcmp(cmd, "dump") == 0 || strcmp(cmd, "eval") == 0))
        return 0; /* under MPI, rank 0 alone: they need no peers */
    if (o.c.opt.weight_decay < 0)
        o.c.opt.weight_decay = o.c.opt.kind == AD_ADAMW ? 0.01 : 0;
    char cmdsp[32];
    snprintf(cmdsp, sizeof cmdsp, "%s ", cmd);
    if (strcmp(cmd, "compile") == 0 && o.weights && !o.out)
        return usage_error(cmdsp, "--weights goes into the plan: it needs -o FILE.gnc%s", "");
    if (strcmp(cmd, "compile") == 0)
        o.c.weights = o.weights;
    if (o.c.opt.kind != AD_SGD && (o.c.opt.momentum > 0 || o.c.opt.nesterov))
        return usage_error(cmdsp, "--momentum and --nesterov apply to --optimizer sgd%s", "");
    if (o.c.opt.nesterov && o.c.opt.momentum == 0)
        return usage_error(cmdsp, "--nesterov needs a --momentum above 0%s", "");
    if (strcmp(cmd, "train") == 0 || strcmp(cmd, "eval") == 0) {
        rc = strcmp(cmd, "train") == 0 ? cmd_train(&o) : cmd_eval(&o);
        for (int i = 0; i < o.c.ndefines; i++)
            free((char *)o.c.define_names[i]);
        return rc;
    }

    if (is_plan) { /* dump or run a plan file's program */
        drv_program prog;
        rc = 1;
        if (cli_plan_open(&o, &prog) == 0)
            rc = strcmp(cmd, "dump") == 0 ? (world->rank > 0 ? 0 : cmd_dump(&o, prog.g))
                                          : cmd_run(&o, &prog);
        drv_program_free(&prog);
        options_free(&o);
        return rc;
    }

    /* compile -o - or --dump-plan=-: the plan alone on standard output, what
       is printed besides on standard error */
    int plan_fd = -1, out_std = o.out && strcmp(o.out, "-") == 0;
    int dump_std = o.dump_plan_file && strcmp(o.dump_plan_file, "-") == 0;
    if (strcmp(cmd, "compile") == 0 && out_std && dump_std) {
        options_free(&o);
        return usage_error("compile ", "-o - and --dump-plan=- both write to standard "
                           "output: give one of them a file%s", "");
    }
    if (strcmp(cmd, "compile") == 0 && (out_std || dump_std)) {
        fflush(stdout);
        plan_fd = dup(STDOUT_FILENO);
        dup2(STDERR_FILENO, STDOUT_FILENO);
    }
    diag d;
    diag_init(&d);
    double t0 = base_now_ms();
    /* dump prints the IR as loaded unless --passes asks for some; compile and
       run optimize, partition and plan */
    drv_program prog = {0};
    if (strcmp(cmd, "dump") == 0) {
        prog.g = drv_load(&o.c, 0, &d);
        if (prog.g && o.c.train && (ad_training_graph(prog.g, &o.c.opt, &d) != 0 ||
                                  ir_verify(prog.g, &d) > 0))
            drv_program_free(&prog);
        pm_options pm = {o.c.verify_each, 0, NULL, NULL, stdout, &o.c.part};
        if (prog.g && o.c.passes && pm_run(prog.g, o.c.passes, &pm, &d) != 0)
            drv_program_free(&prog);
    } else if (drv_compile(&o.c, NULL, 0, o.c.train, &prog, &d) != 0) {
        drv_program_free(&prog);
    }
    double ms = base_now_ms() - t0;
    /* under MPI every rank compiled: the same program, or all of them stop */
    int bad = strcmp(cmd, "dump") == 0 ? (diag_print(&d, stderr), !prog.g)
                                       : cli_mpi_agree(&o, &prog, &d) != 0;
    diag_free(&d);
    ir_graph *g = prog.g;
    mp_plan *plan = prog.mp;
    if (bad)
        rc = 1;
    else if (world->rank > 0 && strcmp(cmd, "compile") == 0)
        rc = 0; /* rank 0 prints the summary */
    else if (strcmp(cmd, "dump") == 0)
        rc = cmd_dump(&o, g);
    else if (strcmp(cmd, "compile") == 0) {
        /* the plan file first: "compiled in" counts NVRTC's time */
        if (o.out) {
            fflush(stdout);
            if (out_std)
                dup2(plan_fd, STDOUT_FILENO);
            rc = cli_plan_write(&o, &prog, o.out) != 0;
            fflush(stdout);
            if (out_std)
                dup2(STDERR_FILENO, STDOUT_FILENO);
            ms = base_now_ms() - t0;
        }
        /* --stats or --dump-memory instead of the summary (--json: last, once
           --dump-plan's file is written); and the plan's dump */
        if (rc == 0 && o.stats && !o.json)
            print_stats(&o, g, plan, ms);
        else if (rc == 0 && o.dump_memory && !o.dump_memory_file)
            mp_print(g, plan, stdout);
        else if (rc == 0 && !o.json)
            rc = cmd_compile(&o, g, plan, peak_without_remat(&o), ms);
        if (rc == 0 && o.dump_memory_file)
            rc = cli_write_memory(g, plan, o.dump_memory_file);
        if (rc == 0 && o.trace_file)
            rc = cli_write_predicted_trace(prog.plan, o.trace_file);
        if (rc == 0 && o.dump_plan && !o.dump_plan_file)
            fputc('\n', stdout);
        fflush(stdout);
        if (dump_std)
            dup2(plan_fd, STDOUT_FILENO);
        if (rc == 0 && o.dump_plan)
            rc = cli_write_plan(&prog, o.dump_plan_file) != 0;
        fflush(stdout);
        if (dump_std)
            dup2(STDERR_FILENO, STDOUT_FILENO);
        if (rc == 0 && o.json)
            rc = compile_json(&o, &prog, ms);
    } else if (o.cuda && cli_plan_memory(&o, &prog, o.c.train) != 0)
        rc = 1; /* the model as its plan, the GPU's program */
    else
        rc = cmd_run(&o, &prog);
    if (rc == 0 && strcmp(cmd, "compile") == 0 && o.out && !o.stats &&
        !(o.dump_memory && !o.dump_memory_file) &&
        !o.json && !out_std)
        printf("plan: %s\n", o.out);
    if (plan_fd >= 0) {
        fflush(stdout);
        dup2(plan_fd, STDOUT_FILENO);
        close(plan_fd);
    }
    drv_candidates_free(prog.plan);
    drv_program_free(&prog);
    for (int i = 0; i < o.c.ndefines; i++)
        free((char *)o.c.define_names[i]);
    for (int i = 0; i < o.ninputs; i++)
        free((char *)o.input_names[i]);
    return rc;
}

int main(int argc, char **argv)
{
    /* a line at a time into a pipe or a file too, so that a log shows progress
       (gnc train > log); a reader that goes away (gnc dump | head) is a write
       error, EPIPE, and the end quiet (below), not a death by SIGPIPE */
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    cli_world world = {0};
    if (cli_mpi_init(&argc, &argv, &world) != 0)
        return 1;
    int rc = command(argc, argv, &world);
    /* what was printed must have been written (> /dev/full, a full disk) */
    if ((fflush(stdout) != 0 || ferror(stdout)) && !cli_stdout_gone()) {
        fprintf(stderr, "gnc: error: cannot write the standard output: %s\n", strerror(errno));
        rc = rc ? rc : 1;
    }
    return cli_mpi_end(&world, rc);
}
