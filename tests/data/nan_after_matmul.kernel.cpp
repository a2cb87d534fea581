// Triton kernels are embedded as comments in /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cl2tnm7cn5acq5qtvnhmuhec5s3pwyc6tsnal4ekiw6bk5nhsiom.wrapper.cpp

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_add_log_mul_relu_sub_0(const float* in_ptr0,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(64L)))
                {
                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
                    auto tmp1 = static_cast<float>(0.5);
                    auto tmp2 = at::vec::Vectorized<float>(tmp1);
                    auto tmp3 = tmp0 - tmp2;
                    auto tmp4 = tmp3.log();
                    auto tmp5 = static_cast<float>(2.0);
                    auto tmp6 = at::vec::Vectorized<float>(tmp5);
                    auto tmp7 = tmp4 * tmp6;
                    auto tmp8 = at::vec::clamp_min(tmp7, decltype(tmp7)(0));
                    auto tmp9 = static_cast<float>(1.0);
                    auto tmp10 = at::vec::Vectorized<float>(tmp9);
                    auto tmp11 = tmp8 + tmp10;
                    tmp11.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_mul_tanh_1(float* in_out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                {
                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
                    auto tmp1 = tmp0.tanh();
                    auto tmp2 = static_cast<float>(3.0);
                    auto tmp3 = at::vec::Vectorized<float>(tmp2);
                    auto tmp4 = tmp1 * tmp3;
                    tmp4.store(in_out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

// Compile cmd
// g++ /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cvijti6wl55rzmqvu24mzaurpijcigxlqunfensift7j64cuqowd.kernel.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX2  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -include /tmp/example/runs/baseline-000/tmp/torchinductor_root/precompiled_headers/c3v2yu5qpbjpllpsajebiivjguxur7vcwttiwagtzsdbqjp6u5p2.h -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx2 -mfma -mf16c  -c -o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cvijti6wl55rzmqvu24mzaurpijcigxlqunfensift7j64cuqowd.kernel.o
// Link cmd
// g++ /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cl2tnm7cn5acq5qtvnhmuhec5s3pwyc6tsnal4ekiw6bk5nhsiom.wrapper.o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cvijti6wl55rzmqvu24mzaurpijcigxlqunfensift7j64cuqowd.kernel.o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cl2tnm7cn5acq5qtvnhmuhec5s3pwyc6tsnal4ekiw6bk5nhsiom/cxxtdqil3mf4tvw2xcnttt7ruzcm5lwcdd2flycb7rhb2bcsnl3o.weights.o -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX2  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -shared -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx2 -mfma -mf16c  -o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cl2tnm7cn5acq5qtvnhmuhec5s3pwyc6tsnal4ekiw6bk5nhsiom.wrapper.so  -ltorch -ltorch_cpu -lgomp  -L/root/.pyenv/versions/3.11.7/lib -L/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib 

// Compile cmd
// g++ /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cvijti6wl55rzmqvu24mzaurpijcigxlqunfensift7j64cuqowd.kernel.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX2  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -include /tmp/example/runs/baseline-001/tmp/torchinductor_root/precompiled_headers/c3v2yu5qpbjpllpsajebiivjguxur7vcwttiwagtzsdbqjp6u5p2.h -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx2 -mfma -mf16c  -c -o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cvijti6wl55rzmqvu24mzaurpijcigxlqunfensift7j64cuqowd.kernel.o
// Link cmd
// g++ /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cl2tnm7cn5acq5qtvnhmuhec5s3pwyc6tsnal4ekiw6bk5nhsiom.wrapper.o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cvijti6wl55rzmqvu24mzaurpijcigxlqunfensift7j64cuqowd.kernel.o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cl2tnm7cn5acq5qtvnhmuhec5s3pwyc6tsnal4ekiw6bk5nhsiom/cxxtdqil3mf4tvw2xcnttt7ruzcm5lwcdd2flycb7rhb2bcsnl3o.weights.o -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX2  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -shared -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx2 -mfma -mf16c  -o /tmp/example/cache/default/inductor/cbalfby7uyq6wgieikgmkvopwtq5jutcmqbeytmr5a2rwbvqm7mz/cl2tnm7cn5acq5qtvnhmuhec5s3pwyc6tsnal4ekiw6bk5nhsiom.wrapper.so  -ltorch -ltorch_cpu -lgomp  -L/root/.pyenv/versions/3.11.7/lib -L/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib 
