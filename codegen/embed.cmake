# Embeds a text file in the library as a C array (the kernel prelude):
#   cmake -DIN=codegen/prelude.cuh -DOUT=prelude.c -DNAME=cg_prelude -P codegen/embed.cmake
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} by codegen/embed.cmake */\n#include <stddef.h>\n"
     "const char ${NAME}[] = {\n${hex}0};\nconst size_t ${NAME}_len = sizeof ${NAME} - 1;\n")
