#include "engine/text/byte_tokenizer.h"
