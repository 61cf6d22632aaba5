"""Serving runtimes loading a model file: llama.cpp/GGUF (and ollama, which runs it), vLLM,
TensorRT(-LLM) engine plans, ONNX Runtime. A file cut short (a download or copy that
stopped) says so in the loader's own words: truncated_checkpoint. A whole file of a version
or architecture the runtime does not know is code_error (the versions disagree), an engine
built for another GPU is torch_arch_mismatch, and a loader that ran out of device memory is
cuda_oom."""
from __future__ import annotations

from boxagent.triage.vocab.gpuarch import OLD_GPU_FIX
from boxagent.triage.vocab.table import lit, rx

LLAMA = ("llama.cpp b3600 src/llama.cpp / src/llama-model-loader.cpp (\"tensor '%s' data is not "
         "within the file bounds, model is corrupted or incomplete\", \"%s: failed to load model\", "
         "\"error loading model: %s\", \"unknown model architecture: '%s'\")")
GGUF = ("ggml b3600 ggml/src/ggml.c gguf_init_from_file (\"%s: failed to read magic\", \"%s: "
        "invalid magic characters '%c%c%c%c'\", \"%s: failed to read tensor info\")")
GGML_CUDA = ("ggml b3600 ggml/src/ggml-cuda.cu (\"allocating %.2f MiB on device %d: cudaMalloc "
             "failed: %s\"); ggml-backend.c (\"unable to allocate %s buffer\")")
OLLAMA = ("ollama 0.3 server/download.go (\"digest mismatch, file must be downloaded again\"), "
          "llm/server.go (\"llama runner process has terminated: %v\")")
VLLM = ("vLLM 0.6 vllm/worker/worker.py raise_if_cache_size_invalid (\"No available memory for the "
        "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\", "
        "\"The model's max seq len (%d) is larger than the maximum number of tokens that can be "
        "stored in KV cache (%d)\"), _check_if_gpu_supports_dtype")
TRT = ("TensorRT 10.0 runtime (ILogger errors: \"The engine plan file is not compatible with this "
       "version of TensorRT, expecting library version %s got %s, please rebuild.\", \"The engine "
       "plan file is generated on an incompatible device, expecting compute %s got compute %s, "
       "please rebuild.\", \"Serialization assertion magicTagRead == kMAGIC_TAG failed\")")
ORT = ("ONNX Runtime 1.18 onnxruntime/core/session/inference_session.cc (\"Load model from %s "
       "failed:%s\"), core/graph/model.cc (\"Protobuf parsing failed.\", \"Unsupported model IR "
       "version: %d, max supported IR version: %d\")")

_S = False
_T = "truncated_checkpoint"

ROWS = (
    rx(_T, r"data is not within the file bounds", "llama_model_load: error loading model: tensor "
       "'blk.31.ffn_down.weight' data is not within the file bounds, model is corrupted or "
       "incomplete", LLAMA, ("data is not within the file bounds",), "llama.cpp"),
    rx(_T, r"gguf_init_from_file[a-z_]*: (failed to read (magic|tensor info|key-value pairs|header|"
       r"tensor data)|invalid magic characters)",
       "gguf_init_from_file_impl: failed to read tensor info", GGUF, ("gguf_init_from_file",),
       "ggml", _S),
    lit(_T, "digest mismatch, file must be downloaded again",
        "Error: digest mismatch, file must be downloaded again: want sha256:6a0746a1ec1a, got "
        "sha256:1f3a2b", OLLAMA, "ollama"),
    rx("code_error", r"unknown model architecture: '", "llama_model_load: error loading model: "
       "error loading model architecture: unknown model architecture: 'gemma3'", LLAMA,
       ("unknown model architecture: '",), "llama.cpp"),
    rx("code_error", r"(llama_load_model_from_file|llama_model_load_from_file[a-z_]*|"
       r"llama_init_from_gpt_params|common_init_from_params): failed to load model",
       "llama_load_model_from_file: failed to load model", LLAMA, ("failed to load model",),
       "llama.cpp", _S),
    rx("cuda_oom", r"cudaMalloc failed: out of memory|unable to allocate CUDA[0-9]* buffer",
       "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 7605.33 MiB on device 0: cudaMalloc "
       "failed: out of memory", GGML_CUDA, ("cudaMalloc failed: out of memory",
                                             "unable to allocate CUDA"), "ggml"),
    lit("cuda_oom", "No available memory for the cache blocks",
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.", VLLM, "vllm"),
    lit("cuda_oom", "is larger than the maximum number of tokens that can be stored in KV cache",
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
        "that can be stored in KV cache (21264). Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine.", VLLM, "vllm"),
    rx("torch_arch_mismatch", r"Bfloat16 is only supported on GPUs with compute capability of at "
       r"least 8\.0", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at "
       "least 8.0. Your Tesla T4 GPU has compute capability 7.5.", VLLM,
       ("Bfloat16 is only supported on GPUs",), "vllm")._replace(fix=OLD_GPU_FIX),
    lit("code_error", "The engine plan file is not compatible with this version of TensorRT",
        "[TRT] [E] 6: The engine plan file is not compatible with this version of TensorRT, "
        "expecting library version 10.0.1.6 got 9.2.0.5, please rebuild.", TRT, "tensorrt"),
    lit("torch_arch_mismatch", "The engine plan file is generated on an incompatible device",
        "[TRT] [E] 6: The engine plan file is generated on an incompatible device, expecting "
        "compute 8.9 got compute 9.0, please rebuild.", TRT, "tensorrt"),
    lit(_T, "Serialization assertion magicTagRead == kMAGIC_TAG failed",
        "[TRT] [E] 1: [stdArchiveReader.cpp::StdArchiveReader::32] Error Code 1: Serialization "
        "(Serialization assertion magicTagRead == kMAGIC_TAG failed.Magic tag does not match)", TRT,
        "tensorrt", _S),
    rx(_T, r"Load model from .* failed: ?Protobuf parsing failed",
       "onnxruntime.capi.onnxruntime_pybind11_state.InvalidProtobuf: [ONNXRuntimeError] : 7 : "
       "INVALID_PROTOBUF : Load model from model.onnx failed:Protobuf parsing failed.", ORT,
       ("Protobuf parsing failed",), "onnxruntime", _S),
    rx("code_error", r"Unsupported model IR version: [0-9]+, max supported IR version: [0-9]+",
       "[ONNXRuntimeError] : 1 : FAIL : Load model from model.onnx failed:/onnxruntime_src/onnxruntime"
       "/core/graph/model.cc:179 Unsupported model IR version: 10, max supported IR version: 9",
       ORT, ("Unsupported model IR version",), "onnxruntime"),
)
