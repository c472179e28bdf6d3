# Embeds a text file in the library as a C array (the kernel prelude), each
# file of SPLICE copied in place of the line that #includes it by name:
#   cmake -DIN=codegen/prelude.cuh -DSPLICE=ir/arith.h -DOUT=prelude.c -DNAME=cg_prelude
#         -P codegen/embed.cmake
file(READ ${IN} text)
foreach(file ${SPLICE})
  get_filename_component(name ${file} NAME)
  set(line "#include \"${name}\"\n")
  string(FIND "${text}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${IN} has no line '#include \"${name}\"' for ${file}")
  endif()
  file(READ ${file} body)
  string(REPLACE "${line}" "${body}" text "${text}")
endforeach()
file(WRITE ${OUT}.txt "${text}")
file(READ ${OUT}.txt hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} by codegen/embed.cmake */\n#include <stddef.h>\n"
     "const char ${NAME}[] = {\n${hex}0};\nconst size_t ${NAME}_len = sizeof ${NAME} - 1;\n")
