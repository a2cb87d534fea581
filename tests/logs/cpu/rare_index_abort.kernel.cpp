// Triton kernels are embedded as comments in /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/csafxrr7pzoowfuk5wuqobm4dowefzd6odwxfyo5zyrqqcsylehk.wrapper.cpp

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_embedding_relu_0(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0,
                       float* out_ptr1)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    #pragma omp parallel
    {
        int tid = omp_get_thread_num();
        {
            #pragma omp for
            for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(4096L); x0+=static_cast<int64_t>(1L))
            {
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(64L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(64L)))
                        {
                            auto tmp0 = in_ptr0[static_cast<int64_t>(x0)];
                            auto tmp1 = tmp0;
                            auto tmp2 = c10::convert<int64_t>(tmp1);
                            AOTI_TORCH_CHECK((0 <= tmp2) & (tmp2 < 20000L), "index out of bounds: 0 <= tmp2 < 20000L");
                            auto tmp4 = at::vec::Vectorized<float>::loadu(in_ptr1 + static_cast<int64_t>(x1 + 64L*tmp0), static_cast<int64_t>(16));
                            auto tmp5 = at::vec::clamp_min(tmp4, decltype(tmp4)(0));
                            tmp5.store(out_ptr0 + static_cast<int64_t>(x1 + 64L*x0));
                        }
                    }
                }
            }
        }
        #pragma omp single
        {
            {
                for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(8L); x0+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x0 >= static_cast<int64_t>(0L) && x0 < static_cast<int64_t>(8L)))
                        {
                            for (int64_t x0_tail = static_cast<int64_t>(0L);x0_tail < static_cast<int64_t>(8L); x0_tail++)
                            {
                                auto tmp0 = x0_tail;
                                auto tmp1 = c10::convert<int64_t>(tmp0);
                                auto tmp2 = static_cast<int64_t>(4);
                                auto tmp3 = tmp1 < tmp2;
                                auto tmp4 = static_cast<int64_t>(2);
                                auto tmp5 = tmp1 < tmp4;
                                auto tmp6 = static_cast<int64_t>(1);
                                auto tmp7 = tmp1 < tmp6;
                                auto tmp8 = static_cast<float>(-0.10278065502643585);
                                auto tmp9 = static_cast<float>(-0.020213767886161804);
                                auto tmp10 = tmp7 ? tmp8 : tmp9;
                                auto tmp11 = static_cast<int64_t>(3);
                                auto tmp12 = tmp1 < tmp11;
                                auto tmp13 = static_cast<float>(-0.0042914897203445435);
                                auto tmp14 = static_cast<float>(0.06794121861457825);
                                auto tmp15 = tmp12 ? tmp13 : tmp14;
                                auto tmp16 = tmp5 ? tmp10 : tmp15;
                                auto tmp17 = static_cast<int64_t>(6);
                                auto tmp18 = tmp1 < tmp17;
                                auto tmp19 = static_cast<int64_t>(5);
                                auto tmp20 = tmp1 < tmp19;
                                auto tmp21 = static_cast<float>(0.07935404777526855);
                                auto tmp22 = static_cast<float>(0.05813395977020264);
                                auto tmp23 = tmp20 ? tmp21 : tmp22;
                                auto tmp24 = static_cast<int64_t>(7);
                                auto tmp25 = tmp1 < tmp24;
                                auto tmp26 = static_cast<float>(-0.07905474305152893);
                                auto tmp27 = static_cast<float>(0.06565254926681519);
                                auto tmp28 = tmp25 ? tmp26 : tmp27;
                                auto tmp29 = tmp18 ? tmp23 : tmp28;
                                auto tmp30 = tmp3 ? tmp16 : tmp29;
                                out_ptr1[static_cast<int64_t>(x0_tail)] = tmp30;
                            }
                        }
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_sum_view_1(const float* in_ptr0,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(1L))
        {
            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(8L); x1+=static_cast<int64_t>(16L))
            {
                {
                    float tmp_acc0 = 0;
                    at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                    at::vec::Vectorized<float> tmp_acc0_vec_arr[2];
                    for (int i = 0; i < 2; i++)
                    {
                        tmp_acc0_vec_arr[i] = at::vec::Vectorized<float>(0);
                    }
                    float tmp_acc0_arr[2];
                    for (int i = 0; i < 2; i++)
                    {
                        tmp_acc0_arr[i] = 0;
                    }
                    #pragma omp parallel
                    {
                        int tid = omp_get_thread_num();
                        at::vec::Vectorized<float> tmp_acc0_vec_local = at::vec::Vectorized<float>(0);
                        float tmp_acc0_local = 0;
                        #pragma omp for
                        for(int64_t x2=static_cast<int64_t>(0L); x2<static_cast<int64_t>(128L); x2+=static_cast<int64_t>(1L))
                        {
                            {
                                if(C10_LIKELY(x1 >= static_cast<int64_t>(0L) && x1 < static_cast<int64_t>(8L)))
                                {
                                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x1 + 8L*x2 + 1024L*x0), static_cast<int64_t>(8L));
                                    tmp_acc0_vec_local = sum_masked_reduce(tmp_acc0_vec_local, tmp0, static_cast<int64_t>(8L));
                                }
                            }
                        }
                        tmp_acc0_vec_arr[tid] = tmp_acc0_vec_local;
                        tmp_acc0_arr[tid] = tmp_acc0_local;
                    }
                    for (int tid = 0; tid < 2; tid++)
                    {
                        tmp_acc0_vec = tmp_acc0_vec + tmp_acc0_vec_arr[tid];
                    }
                    for (int tid = 0; tid < 2; tid++)
                    {
                        tmp_acc0 = tmp_acc0 + tmp_acc0_arr[tid];
                    }
                    if(C10_UNLIKELY(x1 >= static_cast<int64_t>(0L) && x1 < static_cast<int64_t>(8L)))
                    {
                        tmp_acc0_vec.store(out_ptr0 + static_cast<int64_t>(x1 + 8L*x0), static_cast<int64_t>(8L));
                    }
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

// Compile cmd
// g++ /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/c3ytpmex5xahulm2tb4gsjw7he73mdixhyynhdqy454pg7zka4gv.kernel.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX512  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -include /tmp/ra/before/runs/baseline-000/tmp/torchinductor_root/precompiled_headers/cqwilehrszotj2sott5dyiwtzbzo44qssbmnmg232xzyty3mpdu2.h -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -mavx512vnni -mavx512vl  -c -o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/c3ytpmex5xahulm2tb4gsjw7he73mdixhyynhdqy454pg7zka4gv.kernel.o
// Link cmd
// g++ /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/csafxrr7pzoowfuk5wuqobm4dowefzd6odwxfyo5zyrqqcsylehk.wrapper.o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/c3ytpmex5xahulm2tb4gsjw7he73mdixhyynhdqy454pg7zka4gv.kernel.o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/csafxrr7pzoowfuk5wuqobm4dowefzd6odwxfyo5zyrqqcsylehk/cwts77sfwcj5vubcyxnnknidgxfkrlf5owzabngkirufpg6jvdb7.weights.o -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX512  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -shared -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -mavx512vnni -mavx512vl  -o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/csafxrr7pzoowfuk5wuqobm4dowefzd6odwxfyo5zyrqqcsylehk.wrapper.so  -ltorch -ltorch_cpu -lgomp  -L/root/.pyenv/versions/3.11.7/lib -L/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib 

// Compile cmd
// g++ /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/c3ytpmex5xahulm2tb4gsjw7he73mdixhyynhdqy454pg7zka4gv.kernel.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX512  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -include /tmp/ra/before/runs/baseline-001/tmp/torchinductor_root/precompiled_headers/cqwilehrszotj2sott5dyiwtzbzo44qssbmnmg232xzyty3mpdu2.h -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -mavx512vnni -mavx512vl  -c -o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/c3ytpmex5xahulm2tb4gsjw7he73mdixhyynhdqy454pg7zka4gv.kernel.o
// Link cmd
// g++ /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/csafxrr7pzoowfuk5wuqobm4dowefzd6odwxfyo5zyrqqcsylehk.wrapper.o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/c3ytpmex5xahulm2tb4gsjw7he73mdixhyynhdqy454pg7zka4gv.kernel.o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/csafxrr7pzoowfuk5wuqobm4dowefzd6odwxfyo5zyrqqcsylehk/cwts77sfwcj5vubcyxnnknidgxfkrlf5owzabngkirufpg6jvdb7.weights.o -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX512  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -shared -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx512f -mavx512dq -mavx512vl -mavx512bw -mfma -mavx512vnni -mavx512vl  -o /tmp/ra/before/cache/default/inductor/cbf5xcdd3llm6mnvyx65wxugptnsyundbgxgsy5kvq2hihnxc7uw/csafxrr7pzoowfuk5wuqobm4dowefzd6odwxfyo5zyrqqcsylehk.wrapper.so  -ltorch -ltorch_cpu -lgomp  -L/root/.pyenv/versions/3.11.7/lib -L/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib 
